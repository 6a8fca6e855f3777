"""The judge's canaries: its model measured over a rolling window of certain questions.

A live graph's judge has no run to end: its model is measured on the latest
``window`` canary answers (``relmerge.decide.canary.CanaryTally``). The canaries are the
run's (``relmerge.decide.canary_mix``) made of the check's own records: a word-for-word
copy of an existing relation under a redrawn id (must map together) and, among the rules'
hard keeps, a known-directed relation against its reversed twin (must stay apart).

- A ``relation_cluster`` request (``check_many``) carries them among its records (tokens,
  not requests); the real answer is read among real records only.
- A pairwise question (``check``) earns ``canaries`` of credit; a whole one is spent on
  one canary asked as a ``relation_judge`` question of its own, after the check's.

Below ``canary_agreement`` on ``canary_min`` or more of the window's answers (surely
below, at ``canary_confidence``) the model is distrusted, for as long as the judge
lives: the check that tipped it and every later one go to the clarifier (or the policy)
with the reason "the model answered k of n certain questions right" — ``llm_outcome``
``distrusted`` — and the model is asked nothing more.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.canary import Canary, CanaryTally, ask_canary, pick, seed_of
from relmerge.decide.canary_mix import CertainPair, Mixed, mix
from relmerge.decide.tiers import PairDecision
from relmerge.judge.outcome import NoLLMVerdict
from relmerge.model import EntityContext
from relmerge.providers.base import LanguageModel

WINDOW = 50  # canary answers the judge's verdict on its model looks at


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
    """The judge's tally (rolling ``window``), credit for pairwise checks, and figures."""

    def __init__(self, config: DeduplicateRelationsConfig, window: int = WINDOW) -> None:
        self.config = config
        self.tally = CanaryTally.of(config, window)
        self.credit = 0.0
        self.mixed = 0  # canaries answered inside real relation_cluster requests
        self.extra = 0  # canaries asked as requests of their own
        self._reason: str | None = None

    @property
    def on(self) -> bool:
        return self.config.canaries > 0

    @property
    def distrusted(self) -> bool:
        return self.tally.distrusted

    @property
    def why(self) -> NoLLMVerdict:
        """The verdict of a check the distrusted model may not decide."""
        reason = self._reason or self.tally.reason()
        return NoLLMVerdict("distrusted", reason, reason)

    def figures(self) -> dict[str, Any]:
        """What the judge measured, for an app's logs (``RelationJudge.canaries``)."""
        tally = self.tally
        return {
            "asked": tally.asked,
            "answered": tally.answered,
            "right": tally.right,
            "agreement": tally.agreement,
            "window": tally.window,
            "in_requests": self.mixed,
            "extra_requests": self.extra,
            "distrusted": tally.distrusted,
            "reason": self._reason,
        }

    def add(self, answers: Sequence[bool | None], *, mixed: bool) -> None:
        if self.distrusted:
            return  # sticky: later answers (of requests sent before) change nothing
        for right in answers:
            self.tally.add(right)
        if mixed:
            self.mixed += len(answers)
        if self.tally.distrusted:
            self._reason = self.tally.reason()

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
        chosen = pick(offered, 1, ("judge", seed_of(key, self.tally.asked)))
        self.credit -= len(chosen)
        self.extra += len(chosen)
        for canary in chosen:
            self.add([await ask_canary(llm, canary, self.config)], mixed=False)
