"""The judge's preflight: each endpoint checked once, before the judge first uses it.

``relmerge judge`` and ``relmerge run`` check their endpoints before any work; an app's
judge has no "before": it lives as long as the app, and its first check may come much
later. So the check is lazy: the first question to the LLM (the first embedding, for the
embedder) waits for it. A dead or wrong endpoint raises the preflight's
:class:`~relmerge.errors.ProviderError` (one line, the URL, never the key) from that
check, instead of a verdict built on a question that never got an answer. A failed check
is made again before the next question (the app may have started its server since), but
checks that waited for the failed one fail with it rather than each waiting its turn.
"""

from __future__ import annotations

import asyncio

from relmerge.errors import ProviderError
from relmerge.providers.preflight import preflight


class Preflight:
    """One endpoint's check, made once (``ensure``); ``requests`` counts what it sent."""

    def __init__(self, model: object) -> None:
        self.model = model
        self.done = False
        self.requests = 0
        self._tries = 0
        self._failed: ProviderError | None = None
        self._lock: asyncio.Lock | None = None

    async def ensure(self) -> int:
        """Check the endpoint unless it passed before; the requests sent now."""
        if self.done:
            return 0
        if self._lock is None:
            self._lock = asyncio.Lock()
        tries = self._tries
        async with self._lock:  # concurrent checks (check_many) wait for one preflight
            if self.done:
                return 0
            if self._failed is not None and self._tries != tries:  # failed while we waited
                raise ProviderError(str(self._failed), retryable=False, attempts=0)
            self._tries += 1
            try:
                sent = await preflight(self.model)
            except ProviderError as error:
                self.requests += error.attempts
                self._failed = error
                raise
            self.requests += sent
            self.done = True
            return sent
