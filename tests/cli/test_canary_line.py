"""The summary's canary line states the verdict the run applied and the answers it was
reached on: never a final tally beside a threshold it did not cross."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import cast

from relmerge.cli.render import canary_rows
from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.sequential import SequentialTest
from relmerge.run.result import Canaries, RunResult


def _line(answers: Sequence[bool | None], unanswered: int = 0) -> str:
    test = SequentialTest.of(DeduplicateRelationsConfig())
    test.extend(answers)
    figures = test.figures()
    canaries = Canaries(
        0.05,
        test.asked + unanswered,
        test.answered,
        test.right,
        test.agreement,
        figures["verdict"],
        figures["rule"],
        figures["decided_after"],
        figures["evidence"],
        test.distrusted,
        test.reason(),
    )
    (row,) = canary_rows(cast(RunResult, SimpleNamespace(canaries=canaries)))
    return str(row[1])


def test_a_stopped_model_is_stopped_on_the_answers_that_crossed_the_boundary() -> None:
    line = _line([False] * 4 + [True] * 30)
    assert line == (
        "30 of 34 right: stopped by the sequential test (0.89 against 0.62) on its first "
        "4 answers (0 right); its merges were not applied"
    )


def test_a_trusted_model_says_when_it_was_trusted() -> None:
    line = _line([True] * 40, unanswered=2)
    assert line == (
        "40 of 40 right (2 unanswered): trusted by the sequential test (0.89 against 0.62) "
        "on its first 13 answers (13 right)"
    )


def test_too_few_answers_are_not_enough_to_judge() -> None:
    line = _line([True] * 3 + [False])
    assert line == (
        "3 of 4 right: not enough canaries to judge the model (0.89 against 0.62); its "
        "merges were applied"
    )
