"""The progress wrapper: the run's ``llm`` phase counts the requests its model sends."""

from __future__ import annotations

from relmerge.errors import ProviderError
from relmerge.progress import Progress, working_on
from relmerge.providers.base import LanguageModel, LLMRequest, LLMResult


class ProgressModel:
    """Wraps the model that sends requests: each request grows the ``llm`` total when it
    is sent and advances it when answered; HTTP retries count as ``retried``."""

    def __init__(self, inner: LanguageModel, progress: Progress) -> None:
        self.inner = inner
        self.name = inner.name
        self.available = inner.available
        self.progress = progress

    async def invoke(self, request: LLMRequest) -> LLMResult:
        self.progress.add_total("llm", 1)
        try:
            with working_on(self.progress, "llm"):  # the LLM's time: a request in flight
                result = await self.inner.invoke(request)
        except ProviderError as error:
            self.progress.count("llm", "retried", max(0, error.attempts - 1))
            self.progress.count("llm", "failed")
            self.progress.advance("llm")
            raise
        self.progress.count("llm", "retried", max(0, result.attempts - 1))
        self.progress.advance("llm")
        return result
