"""The store merge's canaries: one sequential test per model, kept across batches.

A store grows by many small batches, each with too few canaries to judge its model; so
the store keeps each model's sequential test (``relmerge.decide.sequential``) in its
``relmerge_meta`` table, under a key of the model's identity (provider, endpoint, model,
response format: ``providers.cached.model_identity``), and every batch adds its own
answers to it (read and written in one transaction: two merges at once lose none). The
canaries are the run's: mixed into the batch's requests and heard as each answer is read
(the stack's canary gate), and asked alone with the credit its bare requests earn
(carried over in the store).

The store's test renews: after each trust verdict a new test starts, so a model that
changes behind the same name is still caught. A batch cannot be held as a run holds a
chunk (it is applied whole, at once), so while the test has never decided, a batch that
asked the model anything also asks, one at a time, its own certain pairs (the canaries a
run asks alone) until the test decides or the batch has none left; if it still has not
decided, the batch is decided again without the model, its pairs in
clarifications.jsonl "until it is judged" (exit 3), and later batches go on asking it: a
store's first batches are never merged by a model before it is measured. When it stops
the model — in the middle of a batch, as the answers come — the gate closes at once (no
more requests), the batch is decided again without the model (its undecided pairs in
clarifications.jsonl with the reason, as a run's), and so is every later batch, which
asks it nothing: a stopped model stays stopped until its identity changes or canaries are
turned off (``canaries = 0``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.canary import Canary, ask_canary, pick
from relmerge.decide.sequential import SequentialTest, tally_words, verdict_line
from relmerge.graphstore.base import RelationStore
from relmerge.providers.base import LanguageModel
from relmerge.providers.cached import model_identity
from relmerge.providers.gate import CanaryGateModel
from relmerge.stages.chunk import ChunkResult

PREFIX = "canaries:"
_STATE = ("asked", "answered", "right", "evidence", "since", "since_right", "trusted_tests")


def window_key(model: LanguageModel) -> str:
    """The meta key of ``model``'s test: a digest of its identity."""
    identity = orjson.dumps(model_identity(model), option=orjson.OPT_SORT_KEYS, default=str)
    return PREFIX + hashlib.sha256(identity).hexdigest()[:24]


@dataclass
class Kept:
    """What the store keeps about one model: its identity (to read, never compared), its
    test's state, and the credit of asked canaries not yet spent."""

    model: dict[str, Any] = field(default_factory=dict)
    test: dict[str, Any] = field(default_factory=dict)
    credit: float = 0.0

    @classmethod
    def parse(cls, text: str | None) -> Kept:
        if not text:
            return cls()
        data = orjson.loads(text)
        test = data.get("test")
        return cls(
            data.get("model", {}),
            test if isinstance(test, dict) else {},
            float(data.get("credit", 0.0)),
        )

    def text(self) -> str:
        return orjson.dumps(self.__dict__).decode()

    def restore(self, config: DeduplicateRelationsConfig) -> SequentialTest:
        """The model's test as the store keeps it (a new one where it keeps none, or one
        from before the test: the answers of an older window start it afresh)."""
        test = SequentialTest.of(config, renews=True)
        state = self.test
        if not state:
            return test
        for name in _STATE:
            setattr(test, name, type(getattr(test, name))(state.get(name, 0)))
        verdict = state.get("verdict")
        if verdict in ("judging", "trusted", "distrusted"):
            test.verdict = verdict
        decided = state.get("decided_after")
        if isinstance(decided, list) and len(decided) == 2:
            test.decided_after = (int(decided[0]), int(decided[1]))
        return test

    def keep(self, test: SequentialTest) -> None:
        self.test = {name: getattr(test, name) for name in _STATE}
        self.test["verdict"] = test.verdict
        self.test["decided_after"] = list(test.decided_after) if test.decided_after else None


class StoreCanaries:
    """One merge's view of its model's test: read at the start, added to once."""

    def __init__(
        self,
        store: RelationStore,
        config: DeduplicateRelationsConfig,
        model: LanguageModel,
        gate: CanaryGateModel | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.model = model
        self.gate = gate
        self.key = window_key(model)
        self.kept = Kept()
        self.test = SequentialTest.of(config, renews=True)
        self.answers: list[bool | None] = []  # this batch's, as heard
        self.asked = 0  # this batch's canaries, answered or not
        self.mixed = 0  # of them: inside the batch's own requests
        self.extra = 0  # of them: asked as requests of their own
        self.reworked = False  # the batch was decided again without the model
        self.measured = False
        if gate is not None and self.on:
            gate.listener = self.hear

    @property
    def on(self) -> bool:
        return self.config.canaries > 0 and self.model.available

    @property
    def distrusted(self) -> bool:
        return self.on and self.test.distrusted

    @property
    def waiting(self) -> bool:
        """Never judged: a store's batch then waits for the verdict without the model's
        merges (see the module)."""
        return self.on and self.test.verdict == "judging"

    @property
    def withheld(self) -> bool:
        """Whether the model's merges are not applied (stopped, or not judged yet)."""
        return self.distrusted or self.waiting

    @property
    def reason(self) -> str | None:
        if self.distrusted:
            return self.test.reason()
        if self.waiting:
            test = self.test
            return (
                f"the model answered {test.right} of {test.answered} certain questions right "
                f"(canaries), which crosses neither boundary of {test.rule.text()} yet: its "
                "merges are not applied until it is judged"
            )
        return None

    async def load(self) -> None:
        """The test as the store keeps it now."""
        if self.on:
            self._take(Kept.parse(await self.store.meta_value(self.key)))

    def hear(self, answers: Sequence[bool | None], chunk: int | None = None) -> None:
        """One request's canary answers, as the kernel read them: the test weighs them at
        once (the gate closes when it stops the model)."""
        if self.measured or self.test.distrusted:
            return
        self.answers.extend(answers)
        self.mixed += len(answers)
        self.test.extend(answers)
        if self.test.distrusted and self.gate is not None:
            self.gate.close(self.test.reason())

    async def measure(self, result: ChunkResult) -> None:
        """The canaries the batch's bare requests earned, and while the test has never
        decided the batch's other certain pairs, asked alone (until it decides); then
        every answer of the batch added to the store's test; once per merge (a
        conflict's re-decision measures nothing again)."""
        if not self.on or self.measured:
            return
        self.measured = True
        alone: list[bool | None] = []
        chosen: list[Canary] = []
        if not self.test.distrusted:
            earned = self.kept.credit + self.config.canaries * result.bare_questions
            ranked = pick(result.canaries, len(result.canaries), ("store", self.key))
            wanted = int(earned + 1e-9)
            for canary in ranked:
                judging = self.test.verdict == "judging" and result.llm_questions > 0
                if len(chosen) >= wanted and not judging:
                    break
                chosen.append(canary)
                right = await ask_canary(self.model, canary, self.config)
                alone.append(right)
                self.test.add(right)
                if self.test.distrusted:
                    break
        self.extra = len(chosen)
        self.asked = len(self.answers) + len(chosen)
        given = [*self.answers, *alone]
        credit = self.config.canaries * result.bare_questions - len(chosen)
        identity = model_identity(self.model)
        config = self.config

        def add(text: str | None) -> str:
            kept = Kept.parse(text)
            kept.model = identity
            test = kept.restore(config)
            test.extend(given)
            kept.keep(test)
            kept.credit = max(0.0, round(kept.credit + credit, 6))
            return kept.text()

        self._take(Kept.parse(await self.store.update_meta(self.key, add)))

    def figures(self) -> dict[str, Any]:
        """The result's ``canaries``: this batch's, then the model's test in the store."""
        test = self.test
        figures = {
            "rate": self.config.canaries,
            "asked": self.asked,
            "in_requests": self.mixed,
            "extra_requests": self.extra,
            "answered": test.answered,
            "right": test.right,
            "agreement": test.agreement,
            **test.figures(),
            "trusted_tests": test.trusted_tests,
            "distrusted": self.distrusted,
            "waiting": self.waiting,
            "reason": self.reason or (test.reason() if test.asked else None),
            "reworked": self.reworked,
        }
        counted = {**figures, "asked": test.asked}
        figures["line"] = verdict_line(counted) if test.asked else None
        if self.waiting:
            figures["line"] = (
                f"{tally_words(counted)}: not enough canaries to judge the model yet; its "
                "merges wait for the verdict"
            )
        return figures

    def _take(self, kept: Kept) -> None:
        self.kept = kept
        self.test = kept.restore(self.config)
