"""The run's canaries: one verdict on the model, taken as its answers come.

Where: the canaries ride inside the blocks' own requests (``relmerge.decide.canary_mix``;
a packed request carries them per request, within ``canary_tokens``), and the kernel
tells the model stack how each request answered them as soon as it reads the answer
(``providers.base.hear_canaries``): the stack's canary gate passes them here, from this
process or through a worker's door, before the chunk's result lands. Requests that
carried none while canaries were wanted earn ``canaries`` × their count of credit
(``bare_questions``), spent on asking the chunk's other certain pairs as questions of
their own through the run's model stack.

The verdict is Wald's sequential test (``relmerge.decide.sequential``), checked after
every answer, taken in plan order: the answers of the first chunk not yet landed as they
come, a later chunk's (worked meanwhile on another worker) once every chunk before it
has landed, so the verdict, and the answers it is reached on, do not depend on which
worker was quicker. While it has decided nothing, chunks whose blocks asked the model are
held (not written). Once it trusts the model, they are written as they are, and the
chunks handed out after that carry no canaries (the verdict is final: they would only
cost tokens; a chunk's requests never change once it is handed out, so a re-run sends
the same requests and its cache answers them). Once it stops the
model, the gate of the stack closes at once — questions not yet sent fail as an
unavailable model fails, their pairs go to clarifications.jsonl — and every held or later
chunk whose blocks asked it anything is worked again with the gate closed: its merges
undone, its undecided pairs written to clarifications.jsonl with the reason, its blocks
failed as ``llm_unavailable`` (exit 3). A run that ends before the test decides writes
what it held as it is, and says so ("not enough canaries to judge").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.canary import ask_canary, pick
from relmerge.decide.sequential import SequentialTest
from relmerge.providers.base import LanguageModel
from relmerge.providers.gate import CanaryGateModel
from relmerge.stages.chunk import ChunkResult

Rework = Callable[[int, str], Awaitable[ChunkResult]]


class CanaryDesk:
    """Hears the canary answers, asks each landed chunk's earned canaries, and says which
    results to write, and how."""

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
        self.test = SequentialTest.of(config)
        self.credit = 0.0
        self.questions = 0
        self.mixed = 0  # canaries answered inside real requests
        self.extra = 0  # canaries asked as requests of their own
        self.reworked = 0
        self.reason: str | None = None
        self._held: list[ChunkResult] = []
        self._current = 0  # the first chunk not yet landed: its answers count as they come
        self._later: dict[int, list[bool | None]] = {}  # answers of chunks after it
        if gate is not None and self.on:
            gate.listener = self.hear

    @property
    def on(self) -> bool:
        return self.config.canaries > 0 and self.model.available

    @property
    def wanted(self) -> bool:
        """Whether requests should still carry canaries (the test has not decided)."""
        return self.on and self.test.judging

    def hear(self, answers: Sequence[bool | None], chunk: int | None = None) -> None:
        """One request's canary answers, as the kernel read them (``chunk``: the chunk a
        worker says they came from; None: the one being worked here)."""
        self.mixed += len(answers)
        if chunk is not None and chunk > self._current:
            self._later.setdefault(chunk, []).extend(answers)
        else:
            self._take(answers)

    def _take(self, answers: Sequence[bool | None]) -> None:
        self.test.extend(answers)
        if self.test.distrusted and self.reason is None:
            self.reason = self.test.reason()
            if self.gate is not None:
                self.gate.close(self.reason)

    async def ask(self, done: ChunkResult) -> None:
        """The canaries ``done``'s bare requests earned, asked and weighed (in the
        chunk's seeded order) while the test has not decided; then the next chunk's
        answers heard so far."""
        self.questions += done.llm_questions
        if self.wanted:
            self.credit += self.config.canaries * done.bare_questions
            chosen = pick(done.canaries, int(self.credit + 1e-9), ("run", done.number))
            self.credit -= len(chosen)
            self.extra += len(chosen)
            asked = [ask_canary(self.model, canary, self.config) for canary in chosen]
            self._take(await asyncio.gather(*asked))
        self._current = done.number + 1
        self._take(self._later.pop(self._current, []))

    async def release(self, done: ChunkResult) -> list[ChunkResult]:
        """The results to write now, in plan order (re-worked where the model is
        distrusted); ``done`` may be held until the model is judged."""
        if self.reason is not None:
            ready, self._held = [*self._held, done], []
            return [await self._without_model(result) for result in ready]
        if self.wanted and (self._held or done.llm_questions > 0):
            self._held.append(done)
            return []
        ready, self._held = [*self._held, done], []
        return ready

    def drain(self) -> list[ChunkResult]:
        """What is still held when the last chunk landed: written as it is (the test
        decided nothing: not enough canaries to judge the model)."""
        ready, self._held = self._held, []
        return ready

    async def _without_model(self, result: ChunkResult) -> ChunkResult:
        if result.llm_questions == 0 or self.reason is None:
            return result  # its blocks asked the model nothing: nothing to undo
        self.reworked += 1
        return await self.rework(result.number, self.reason)

    def figures(self) -> dict[str, Any]:
        """The verdict for the result: the rule, the figures it was applied to, why."""
        return {**self.test.figures(), "reason": self.test.reason() if self.test.asked else None}
