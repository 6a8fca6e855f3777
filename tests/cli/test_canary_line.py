"""The summary's canary line names the verdict's rule: "surely below" only when the
verdict asked for more than the agreement itself (``canary_confidence`` above 0.5)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from relmerge.cli.render import canary_rows
from relmerge.run.result import Canaries, RunResult


def _line(canaries: Canaries) -> str:
    (row,) = canary_rows(cast(RunResult, SimpleNamespace(canaries=canaries)))
    return str(row[1])


def test_a_distrusted_model_is_below_the_threshold_on_the_agreement_itself() -> None:
    line = _line(Canaries(0.05, 12, 12, 6, 0.5, 10, 0.8, True, "…"))
    assert line.startswith("6 of 12 right: below the threshold")


def test_a_surer_verdict_says_surely_below() -> None:
    line = _line(Canaries(0.05, 30, 30, 15, 0.5, 10, 0.8, True, "…", confidence=0.95))
    assert "surely below the threshold" in line


def test_too_few_answers_are_too_few_to_judge() -> None:
    line = _line(Canaries(0.05, 4, 3, 3, 1.0, 10, 0.8, False, None))
    assert line == "3 of 3 right (1 unanswered): too few to judge the model (fewer than 10)"
