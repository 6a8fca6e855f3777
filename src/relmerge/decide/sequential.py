"""The canary verdict: Wald's sequential probability ratio test, checked after every answer.

A run checks its model's canary answers as they come, so the verdict is a sequential
test, and a point estimate checked after every answer is not one: its error rates grow
with every look (a good model is stopped on an early dip, and the message then quotes a
final tally it never applied). Wald's test weighs each answer by how much likelier it is
from a model worth trusting (agreeing ``good`` of the time) than from a model to stop
(agreeing ``bad`` of the time), adds the logarithms, and decides the first time the sum
crosses a boundary: ``log((1 - false_stop) / false_trust)`` trusts the model,
``log(false_stop / (1 - false_trust))`` stops it. Checked after every answer, it stops a
model that agrees ``good`` of the time with probability at most about ``false_stop``,
and trusts one that agrees ``bad`` of the time with probability at most about
``false_trust`` (Wald's bounds; ``bench/canary_verdict.py`` measures them); better models
are stopped, and worse ones trusted, less often still.

Evidence that reaches neither boundary decides nothing: the model stays trusted and the
run says so ("not enough canaries to judge"). A test that ``renews`` (a store's model
across batches, a live judge) starts again after each trust verdict, so a model that
changes behind the same name is still caught; a stop is final for that model.

Pure: no I/O, no randomness.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from relmerge.config import DeduplicateRelationsConfig

Verdict = Literal["judging", "trusted", "distrusted"]


@dataclass(frozen=True)
class TestRule:
    """The two models the test tells apart and how often it may be wrong about each."""

    good: float  # the agreement of a model worth trusting
    bad: float  # the agreement of a model to stop
    false_stop: float  # at most this share of models agreeing ``good`` of the time stopped
    false_trust: float  # at most this share of models agreeing ``bad`` of the time trusted

    __test__ = False  # not a pytest test class, whatever its name

    def __post_init__(self) -> None:
        if not 0.0 < self.bad < self.good < 1.0:
            raise ValueError(f"need 0 < bad ({self.bad}) < good ({self.good}) < 1")
        if not (0.0 < self.false_stop < 0.5 and 0.0 < self.false_trust < 0.5):
            raise ValueError("the error rates must lie between 0 and 0.5")

    @classmethod
    def of(cls, config: DeduplicateRelationsConfig) -> TestRule:
        return cls(
            config.canary_good_agreement,
            config.canary_bad_agreement,
            config.canary_false_stop,
            config.canary_false_trust,
        )

    @property
    def trust_at(self) -> float:
        """The evidence (log-likelihood ratio) at or above which the model is trusted."""
        return math.log((1 - self.false_stop) / self.false_trust)

    @property
    def stop_at(self) -> float:
        """The evidence at or below which the model is stopped."""
        return math.log(self.false_stop / (1 - self.false_trust))

    def step(self, right: bool) -> float:
        """The evidence one answer adds: positive when right, negative when wrong."""
        if right:
            return math.log(self.good / self.bad)
        return math.log((1 - self.good) / (1 - self.bad))

    @property
    def fewest_to_trust(self) -> int:
        """Right answers in a row that trust a model (no test trusts on fewer)."""
        return math.ceil(self.trust_at / self.step(True) - 1e-9)

    @property
    def fewest_to_stop(self) -> int:
        """Wrong answers in a row that stop a model."""
        return math.ceil(self.stop_at / self.step(False) - 1e-9)

    def text(self) -> str:
        """The rule in words, as every message and the report state it."""
        return (
            f"Wald's sequential test: a model agreeing {self.good:g} of the time against "
            f"one agreeing {self.bad:g}, at most {_share(self.false_stop)} of the first "
            f"stopped and {_share(self.false_trust)} of the second trusted"
        )

    def figures(self) -> dict[str, Any]:
        """The rule as the result's JSON states it."""
        return {
            "test": "sprt",
            "good_agreement": self.good,
            "bad_agreement": self.bad,
            "false_stop": self.false_stop,
            "false_trust": self.false_trust,
            "trust_at": round(self.trust_at, 4),
            "stop_at": round(self.stop_at, 4),
        }


def _share(rate: float) -> str:
    return f"{rate * 100:g}%"


@dataclass
class SequentialTest:
    """The canary answers of one model, as they come, and the verdict they reach.

    ``evidence``, ``since`` and ``since_right`` belong to the test under way (with
    ``renews``, a new one starts after each trust verdict); ``answered`` and ``right``
    count every answer taken. ``decided_after``: the answers and right answers of the
    test that reached the standing verdict, when it did."""

    rule: TestRule
    renews: bool = False
    asked: int = 0
    answered: int = 0
    right: int = 0
    evidence: float = 0.0
    since: int = 0
    since_right: int = 0
    verdict: Verdict = "judging"
    decided_after: tuple[int, int] | None = None
    trusted_tests: int = 0
    __test__ = False  # not a pytest test class, whatever its name

    @classmethod
    def of(cls, config: DeduplicateRelationsConfig, *, renews: bool = False) -> SequentialTest:
        return cls(TestRule.of(config), renews)

    @property
    def distrusted(self) -> bool:
        return self.verdict == "distrusted"

    @property
    def judging(self) -> bool:
        """Whether answers still count: no verdict yet, or a renewing test after a trust."""
        return self.verdict == "judging" or (self.verdict == "trusted" and self.renews)

    @property
    def agreement(self) -> float | None:
        return round(self.right / self.answered, 4) if self.answered else None

    def add(self, right: bool | None) -> None:
        """One canary answer (None: no valid answer, asked but not counted). Answers after
        a final verdict are counted, and change nothing."""
        self.asked += 1
        if right is None:
            return
        self.answered += 1
        self.right += right
        if not self.judging:
            return
        self.since += 1
        self.since_right += right
        self.evidence += self.rule.step(right)
        if self.evidence <= self.rule.stop_at:
            self.verdict = "distrusted"
            self.decided_after = (self.since, self.since_right)
        elif self.evidence >= self.rule.trust_at:
            self.verdict = "trusted"
            self.decided_after = (self.since, self.since_right)
            self.trusted_tests += 1
            if self.renews:
                self.evidence, self.since, self.since_right = 0.0, 0, 0

    def extend(self, answers: Iterable[bool | None]) -> None:
        for right in answers:
            self.add(right)

    def reason(self) -> str:
        """The standing verdict in words: the rule, and the figures it was applied to."""
        rule = self.rule
        n, k = self.decided_after or (self.since, self.since_right)
        if self.verdict == "distrusted":
            return (
                f"the model answered {k} of {n} certain questions right (canaries), which "
                f"crosses the stop boundary of {rule.text()}: its merges are not applied"
            )
        if self.verdict == "trusted":
            later = ""
            if self.renews and self.since:
                later = f" ({self.since_right} of {self.since} right since: the test goes on)"
            return (
                f"the model answered {k} of {n} certain questions right (canaries), which "
                f"crosses the trust boundary of {rule.text()}: its merges are applied{later}"
            )
        return (
            f"not enough canaries to judge the model: {self.answered} answered, {self.right} "
            f"right, which crosses neither boundary of {rule.text()} (trusting takes "
            f"{rule.fewest_to_trust} or more right answers, stopping {rule.fewest_to_stop} "
            "or more wrong ones): its merges are applied"
        )

    def figures(self) -> dict[str, Any]:
        """The verdict as the result's JSON states it: the rule, the figures it was
        applied to, and the boundary crossed (None: neither)."""
        crossed = {"trusted": "trust", "distrusted": "stop"}.get(self.verdict)
        decided = self.decided_after
        return {
            "verdict": "not_judged" if self.verdict == "judging" else self.verdict,
            "rule": self.rule.figures(),
            "decided_after": None
            if decided is None
            else {"answered": decided[0], "right": decided[1], "boundary": crossed},
            "evidence": round(self.evidence, 4),
        }


def tally_words(canaries: Mapping[str, Any]) -> str:
    """A result's canary answers counted: "k of n right" (and how many went unanswered)."""
    answered, right = int(canaries.get("answered") or 0), int(canaries.get("right") or 0)
    asked = int(canaries.get("asked") or answered)
    shown = f"{right} of {answered} right"
    return shown + (f" ({asked - answered} unanswered)" if asked > answered else "")


def verdict_words(canaries: Mapping[str, Any]) -> str:
    """A result's canary verdict (or a store's): the test's, the answers it was reached
    on, and what became of the model's merges ("" for older results without one)."""
    verdict = canaries.get("verdict")
    decided = canaries.get("decided_after")
    at = ""
    if isinstance(decided, Mapping):
        at = f" on its first {decided.get('answered')} answers ({decided.get('right')} right)"
    rule = canaries.get("rule")
    good = rule.get("good_agreement") if isinstance(rule, Mapping) else None
    bad = rule.get("bad_agreement") if isinstance(rule, Mapping) else None
    between = f" ({good:g} against {bad:g})" if good is not None and bad is not None else ""
    if verdict == "distrusted":
        return f"stopped by the sequential test{between}{at}; its merges were not applied"
    if verdict == "trusted":
        return f"trusted by the sequential test{between}{at}"
    if verdict == "not_judged":
        return f"not enough canaries to judge the model{between}; its merges were applied"
    return ""


def verdict_line(canaries: Mapping[str, Any]) -> str:
    """A result's ``canaries`` as one line: the tally, then the verdict."""
    verdict = verdict_words(canaries)
    return tally_words(canaries) + (f": {verdict}" if verdict else "")
