"""The canary gate: stop asking a model the run no longer trusts.

When a run's canary questions (``relmerge.decide.canary``) show its model answering
certain questions wrong, its merges stop being applied; this layer then refuses every
later request with :class:`~relmerge.errors.LLMUnavailableError` and the reason, so the
questions left fail as an unavailable LLM fails (their pairs written for a person, exit
3) and no more requests are spent on answers that would be thrown away. A gate built
closed stands in for the model when the run re-works a chunk without it.
"""

from __future__ import annotations

from relmerge.errors import LLMUnavailableError
from relmerge.providers.base import LanguageModel, LLMRequest, LLMResult


class CanaryGateModel:
    """Passes requests through until :meth:`close`; then refuses them, saying why."""

    def __init__(self, inner: LanguageModel, closed_because: str | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.available = inner.available
        self.reason = closed_because
        self.refused = 0  # requests refused (never sent) since it closed

    @property
    def closed(self) -> bool:
        return self.reason is not None

    def close(self, reason: str) -> None:
        self.reason = self.reason or reason

    async def invoke(self, request: LLMRequest) -> LLMResult:
        if self.reason is not None:
            self.refused += 1
            raise LLMUnavailableError(self.reason)
        return await self.inner.invoke(request)
