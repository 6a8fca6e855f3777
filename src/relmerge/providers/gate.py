"""The canary gate: stop asking a model the run no longer trusts.

The kernel tells the stack how each request's canaries were answered as soon as it reads
the answer (``providers.base.hear_canaries``); this layer passes them to its ``listener``
(the run's or the store merge's verdict, ``relmerge.decide.sequential``). When the
verdict stops the model, its merges are not applied, and this layer refuses every later
request with :class:`~relmerge.errors.LLMUnavailableError` and the reason: the questions
not yet sent fail at once as an unavailable LLM fails (their pairs written for a person,
exit 3), and nothing more is spent on answers that would be thrown away. A gate built
closed stands in for the model when the run re-works a chunk without it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from relmerge.errors import LLMUnavailableError
from relmerge.providers.base import LanguageModel, LLMRequest, LLMResult

# Hears a request's canary answers (and the chunk they came from, where a worker said).
Listener = Callable[[Sequence[bool | None], int | None], None]


class CanaryGateModel:
    """Passes requests through until :meth:`close`; then refuses them, saying why."""

    def __init__(self, inner: LanguageModel, closed_because: str | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.available = inner.available
        self.reason = closed_because
        self.refused = 0  # requests refused (never sent) since it closed
        self.listener: Listener | None = None

    @property
    def closed(self) -> bool:
        return self.reason is not None

    def close(self, reason: str) -> None:
        self.reason = self.reason or reason

    async def hear_canaries(self, answers: Sequence[bool | None], chunk: int | None = None) -> None:
        """The canary answers, to the listener (which may :meth:`close` this gate)."""
        if self.listener is not None:
            self.listener(answers, chunk)

    async def invoke(self, request: LLMRequest) -> LLMResult:
        if self.reason is not None:
            self.refused += 1
            raise LLMUnavailableError(self.reason)
        return await self.inner.invoke(request)
