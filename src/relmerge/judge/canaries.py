"""The judge's canaries: its model weighed by a sequential test that renews.

A live graph's judge has no run to end: its model's canary answers feed the run's
sequential test (``relmerge.decide.sequential``), which starts again after each trust
verdict, so a model that changes behind the same name is still caught. The canaries are the
run's (``relmerge.decide.canary_mix``) made of the check's own records: a word-for-word
copy of an existing relation under a redrawn id (must map together) and, among the rules'
hard keeps, a known-directed relation against its reversed twin (must stay apart).

- A ``relation_cluster`` request (``check_many``) carries them among its records (tokens,
  not requests); the real answer is read among real records only.
- A pairwise question (``check``) earns ``canaries`` of credit; a whole one is spent on
  one canary asked as a ``relation_judge`` question of its own, after the check's.

When the test stops the model, it is distrusted for as long as the judge lives: the
check that tipped it and every later one go to the clarifier (or the policy) with the
reason "the model answered k of n certain questions right", the rule and the boundary
crossed — ``llm_outcome`` ``distrusted`` — and the model is asked nothing more. While the
test has decided nothing, the model's answers are applied.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.canary import Canary, ask_canary, pick, seed_of
from relmerge.decide.canary_mix import CertainPair, Mixed, mix
from relmerge.decide.sequential import SequentialTest
from relmerge.decide.tiers import PairDecision
from relmerge.judge.outcome import NoLLMVerdict
from relmerge.model import EntityContext
from relmerge.providers.base import LanguageModel


def certain_pairs(
    olds: int, candidates: Sequence[tuple[int, Sequence[PairDecision]]]
) -> list[CertainPair]:
    """Reversed twins among the rules' hard keeps, as positions of a request's records:
    ``olds`` existing relations first, then each candidate at its position with its pairs
    (``pair.b`` - 1: the existing relation)."""
    return [
        CertainPair(pair.b - 1, position, "keep_both")
        for position, pairs in candidates
        for pair in pairs
        if pair.verdict == "keep" and pair.hard and pair.tier == "direction" and pair.b <= olds
    ]


class JudgeCanaries:
    """The judge's sequential test (renewing), credit for pairwise checks, and figures."""

    def __init__(self, config: DeduplicateRelationsConfig) -> None:
        self.config = config
        self.test = SequentialTest.of(config, renews=True)
        self.credit = 0.0
        self.mixed = 0  # canaries answered inside real relation_cluster requests
        self.extra = 0  # canaries asked as requests of their own
        self._reason: str | None = None

    @property
    def on(self) -> bool:
        return self.config.canaries > 0

    @property
    def distrusted(self) -> bool:
        return self.test.distrusted

    @property
    def why(self) -> NoLLMVerdict:
        """The verdict of a check the distrusted model may not decide."""
        reason = self._reason or self.test.reason()
        return NoLLMVerdict("distrusted", reason, reason)

    def figures(self) -> dict[str, Any]:
        """What the judge measured, for an app's logs (``RelationJudge.canaries``): the
        counts, the test's verdict, the rule and the answers it was reached on."""
        test = self.test
        return {
            "asked": test.asked,
            "answered": test.answered,
            "right": test.right,
            "agreement": test.agreement,
            **test.figures(),
            "trusted_tests": test.trusted_tests,
            "in_requests": self.mixed,
            "extra_requests": self.extra,
            "distrusted": test.distrusted,
            "reason": self._reason or (test.reason() if test.asked else None),
        }

    def add(self, answers: Sequence[bool | None], *, mixed: bool) -> None:
        if self.distrusted:
            return  # final: later answers (of requests sent before) change nothing
        self.test.extend(answers)
        if mixed:
            self.mixed += len(answers)
        if self.test.distrusted:
            self._reason = self.test.reason()

    def mix(self, records: list[dict[str, Any]], certain: Sequence[CertainPair]) -> Mixed:
        """``records`` with canaries mixed in (each record a cluster of its own)."""
        if not self.on:
            return Mixed(list(records), list(range(len(records))))
        seed = ("judge", [record["relation_id"] for record in records])
        return mix(
            [[i] for i in range(len(records))],
            certain,
            lambda units, _: records[units[0]],
            lambda member: records[member],
            seed,
        )

    async def after_pairwise(
        self,
        llm: LanguageModel,
        records: list[dict[str, Any]],
        certain: Sequence[CertainPair],
        entities: tuple[EntityContext, EntityContext],
    ) -> None:
        """A pairwise question earned its credit: a whole one asks one canary made of the
        check's records (``records``: the existing ones, then the candidate)."""
        if not self.on or self.distrusted:
            return
        self.credit += self.config.canaries
        if self.credit + 1e-9 < 1:
            return
        mixed = self.mix(records, certain)
        key = "|".join(str(r["relation_id"]) for r in records)
        offered = [
            Canary(
                (mixed.records[x], mixed.records[y]),
                entities,
                expected,
                f"{key}|{x}|{y}",
            )
            for x, y, expected in mixed.checks
        ]
        chosen = pick(offered, 1, ("judge", seed_of(key, self.test.asked)))
        self.credit -= len(chosen)
        self.extra += len(chosen)
        for canary in chosen:
            self.add([await ask_canary(llm, canary, self.config)], mixed=False)
