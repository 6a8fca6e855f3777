"""The circuit breaker: stop sending to an endpoint that stopped answering mid-run.

The preflight proves an endpoint works before a run; this wrapper covers one that dies
during it. It sits next to the provider, under the cache, the budget and the accounting,
so it sees every request a run sends (from this process or, through the Ray gateway, from
every worker) and never a cached answer. A question (one group's or block's request and
its retries, see ``relmerge.decide.retry``) whose every attempt failed in transport —
refused, DNS, TLS, timeout, 5xx, dropped connection — is reported with
:meth:`CircuitBreakerModel.note_unreachable`; after ``after_groups`` such questions with
no answer from the endpoint in between, the breaker opens and every later request is
refused with :class:`~relmerge.errors.LLMUnavailableError` before it is sent. A request
already in flight finishes its own transport retries (so that every request sent is
counted). Any answer that comes back, valid or not, resets the count: invalid answers
never trip it.
"""

from __future__ import annotations

from relmerge.errors import LLMUnavailableError, ProviderError
from relmerge.providers.base import LanguageModel, LLMRequest, LLMResult


class CircuitBreakerModel:
    """Refuses requests once ``after_groups`` questions in a row got no answer at all."""

    def __init__(self, inner: LanguageModel, after_groups: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.available = inner.available
        self.after_groups = after_groups
        self.unreachable_in_a_row = 0
        self.open = False
        self.refused = 0  # requests refused (never sent) since it opened

    def note_unreachable(self) -> None:
        """A question whose every attempt failed in transport; opens at ``after_groups``."""
        self.unreachable_in_a_row += 1
        if self.unreachable_in_a_row >= self.after_groups:
            self.open = True

    async def invoke(self, request: LLMRequest) -> LLMResult:
        if self.open:
            self.refused += 1
            raise LLMUnavailableError(
                f"the LLM endpoint stopped answering ({self.after_groups} questions in a row "
                "got no answer); no more requests are sent in this run"
            )
        try:
            result = await self.inner.invoke(request)
        except ProviderError as error:
            if not error.transport:
                self.unreachable_in_a_row = 0  # the endpoint answered, with a refusal
            raise
        self.unreachable_in_a_row = 0  # an answer came back: the endpoint is alive
        return result
