"""Limits on what a run sends to its language model: a spending budget and a request rate.

``BudgetModel`` stops sending once ``max_requests`` requests (retries included) or
``max_tokens`` tokens are spent: the request is refused with :class:`BudgetExhaustedError`
before anything is sent, and the stages decide the rest without the LLM and record an
issue. A request already in flight when the budget runs out still finishes (with its
retries), so the spend can pass the budget by at most the answers in flight.

``RateLimitedModel`` spaces request starts to at most ``requests_per_minute`` (a leaky
bucket: a burst up to the per-minute amount, then a steady pace), for endpoints that
enforce a quota.
"""

from __future__ import annotations

from aiolimiter import AsyncLimiter

from relmerge.errors import BudgetExhaustedError, ProviderError
from relmerge.providers.base import LanguageModel, LLMRequest, LLMResult


class BudgetModel:
    """Refuses new requests once the run's request or token budget is spent."""

    def __init__(
        self, inner: LanguageModel, max_requests: int | None, max_tokens: int | None
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.available = inner.available
        self.max_requests = max_requests
        self.max_tokens = max_tokens
        self.sent = 0
        self.tokens = 0
        self._in_flight = 0
        self.exhausted = False

    def _spent(self) -> str | None:
        if self.max_requests is not None and self.sent + self._in_flight >= self.max_requests:
            return f"the LLM request budget is spent ({self.max_requests} requests)"
        if self.max_tokens is not None and self.tokens >= self.max_tokens:
            return f"the LLM token budget is spent ({self.max_tokens} tokens)"
        return None

    async def invoke(self, request: LLMRequest) -> LLMResult:
        reason = self._spent()
        if reason is not None:
            self.exhausted = True
            raise BudgetExhaustedError(reason + "; decided without the LLM")
        self._in_flight += 1
        try:
            result = await self.inner.invoke(request)
        except ProviderError as error:
            self.sent += error.attempts
            raise
        finally:
            self._in_flight -= 1
        self.sent += result.attempts
        self.tokens += result.usage.total_tokens
        return result


class RateLimitedModel:
    """Waits before each request so that at most ``requests_per_minute`` start per minute."""

    def __init__(self, inner: LanguageModel, requests_per_minute: float) -> None:
        self.inner = inner
        self.name = inner.name
        self.available = inner.available
        self._limiter = AsyncLimiter(requests_per_minute, 60.0)

    async def invoke(self, request: LLMRequest) -> LLMResult:
        await self._limiter.acquire()
        return await self.inner.invoke(request)
