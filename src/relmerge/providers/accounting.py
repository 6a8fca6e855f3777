"""Counts what a run spends on its language model: requests sent, cache hits, tokens."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from relmerge.errors import ProviderError
from relmerge.providers.base import LanguageModel, LLMRequest, LLMResult


@dataclass
class LLMStats:
    requests: int = 0
    cache_hits: int = 0
    failed_requests: int = 0
    invalid_answers: int = 0  # answers that arrived but were not JSON or failed validation
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def tokens(self) -> dict[str, int]:
        return {
            "prompt": self.prompt_tokens,
            "completion": self.completion_tokens,
            "total": self.prompt_tokens + self.completion_tokens,
        }


class AccountingModel:
    """Wraps any :class:`LanguageModel` and adds up requests and tokens into ``stats``."""

    def __init__(self, inner: LanguageModel, on_invalid: Callable[[], None] = lambda: None) -> None:
        """``on_invalid`` hears of each invalid answer (it is asked again: progress)."""
        self.inner = inner
        self.name = inner.name
        self.available = inner.available
        self.stats = LLMStats()
        self.on_invalid = on_invalid

    def note_invalid(self) -> None:
        self.stats.invalid_answers += 1
        self.on_invalid()

    async def invoke(self, request: LLMRequest) -> LLMResult:
        try:
            result = await self.inner.invoke(request)
        except ProviderError as error:
            self.stats.requests += error.attempts
            self.stats.failed_requests += error.attempts
            raise
        if result.cached:
            self.stats.cache_hits += 1
        else:
            self.stats.requests += result.attempts
            self.stats.failed_requests += result.attempts - 1
            self.stats.prompt_tokens += result.usage.prompt_tokens
            self.stats.completion_tokens += result.usage.completion_tokens
        return result
