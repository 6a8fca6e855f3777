"""The run's canaries: counted in the driver, chunk by chunk in plan order, once.

Where: most canaries ride inside the blocks' own requests (``relmerge.decide.canary_mix``:
certain pairs of the block mixed into its ``relation_cluster`` requests, tokens not
requests); a chunk (on any engine) reports how the model answered them in block order
(``ChunkResult.canary_answers``), and the driver tallies them as each result lands in plan
order. Requests that carried none (their blocks had no certain pair) earn ``canaries`` ×
their count of credit (``bare_questions``), spent on asking the chunk's other certain
pairs as questions of their own (``ChunkResult.canaries``; whole ones, the rest carries
over) through the run's own model stack — so the extra requests are bounded (at most
``canaries`` × the run's requests), the tally lives in one place, and the choice is the
same on every engine. Answers are cached like any other.

When: the verdict is rolling, in plan order. While fewer than ``canary_min`` canaries
were answered the model is not judged yet, and chunks whose blocks asked it anything are
held (not written); once it is judged trusted they are written as they are. Once the
agreement falls below ``canary_agreement`` (never before ``canary_min`` answers; surely
below, at ``canary_confidence``: ``CanaryTally.judges``) the
model is distrusted for the rest of the run: the gate of the stack closes (no more
requests), and every held or later chunk whose blocks asked it anything is worked again
with the gate closed — its merges undone, its undecided pairs written to
clarifications.jsonl with the reason, its blocks failed as ``llm_unavailable`` (exit 3).
A run that ends before ``canary_min`` answers writes what it held as it is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.canary import CanaryTally, ask_canary, pick
from relmerge.providers.base import LanguageModel
from relmerge.providers.gate import CanaryGateModel
from relmerge.stages.chunk import ChunkResult

Rework = Callable[[int, str], Awaitable[ChunkResult]]


class CanaryDesk:
    """Asks each landed chunk's canaries and says which results to write, and how."""

    def __init__(
        self,
        config: DeduplicateRelationsConfig,
        model: LanguageModel,
        gate: CanaryGateModel | None,
        rework: Rework,
    ) -> None:
        self.config = config
        self.model = model
        self.gate = gate
        self.rework = rework
        self.tally = CanaryTally.of(config)
        self.credit = 0.0
        self.questions = 0
        self.mixed = 0  # canaries answered inside real requests
        self.extra = 0  # canaries asked as requests of their own
        self.reworked = 0
        self.reason: str | None = None
        self._held: list[ChunkResult] = []

    @property
    def on(self) -> bool:
        return self.config.canaries > 0 and self.model.available

    async def ask(self, done: ChunkResult) -> None:
        """The canaries ``done`` answered in its requests, tallied; then those its bare
        requests earned, asked and tallied (in the chunk's seeded order)."""
        self.questions += done.llm_questions
        if not self.on or self.tally.distrusted:
            return
        for right in done.canary_answers:
            self.tally.add(right)
        self.mixed += len(done.canary_answers)
        self.credit += self.config.canaries * done.bare_questions
        chosen = pick(done.canaries, int(self.credit + 1e-9), ("run", done.number))
        self.credit -= len(chosen)
        self.extra += len(chosen)
        answers = await asyncio.gather(*(ask_canary(self.model, c, self.config) for c in chosen))
        for right in answers:
            self.tally.add(right)
        if self.tally.distrusted and self.reason is None:
            self.reason = self.tally.reason()
            if self.gate is not None:
                self.gate.close(self.reason)

    async def release(self, done: ChunkResult) -> list[ChunkResult]:
        """The results to write now, in plan order (re-worked where the model is
        distrusted); ``done`` may be held until the model is judged."""
        if self.reason is not None:
            ready, self._held = [*self._held, done], []
            return [await self._without_model(result) for result in ready]
        judged = self.tally.answered >= self.config.canary_min
        if self.on and not judged and (self._held or done.llm_questions > 0):
            self._held.append(done)
            return []
        ready, self._held = [*self._held, done], []
        return ready

    def drain(self) -> list[ChunkResult]:
        """What is still held when the last chunk landed: written as it is (too few
        canaries to judge the model)."""
        ready, self._held = self._held, []
        return ready

    async def _without_model(self, result: ChunkResult) -> ChunkResult:
        if result.llm_questions == 0 or self.reason is None:
            return result  # its blocks asked the model nothing: nothing to undo
        self.reworked += 1
        return await self.rework(result.number, self.reason)
