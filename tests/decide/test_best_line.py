"""``best_line``: a pair with a stored relation's lines gets one verdict, precision first."""

from __future__ import annotations

from relmerge.decide.job import best_line
from relmerge.decide.tiers import PairDecision


def _d(verdict: str, tier: str, hard: bool = False, fuzzy: float = 50.0) -> PairDecision:
    return PairDecision(0, 1, verdict, tier, hard, scores={"fuzzy": fuzzy, "cosine": 0.5})  # type: ignore[arg-type]


def test_a_hard_keep_on_any_line_binds() -> None:
    decided = best_line(
        [_d("undecided", "band"), _d("merge", "fuzzy_high"), _d("keep", "direction", True)]
    )
    assert decided.tier == "direction" and decided.hard


def test_the_strongest_merge_wins_over_questions_and_soft_keeps() -> None:
    lines = [
        _d("keep", "fuzzy_low"),
        _d("merge", "fuzzy_high", fuzzy=92),
        _d("merge", "fuzzy_high", fuzzy=99),
    ]
    assert best_line(lines).scores["fuzzy"] == 99


def test_a_question_before_a_soft_keep_and_the_whole_keep_last() -> None:
    assert best_line([_d("keep", "fuzzy_low"), _d("undecided", "guard")]).tier == "guard"
    assert (
        best_line([_d("keep", "fuzzy_low"), _d("keep", "fuzzy_low", fuzzy=1)]).scores["fuzzy"] == 50
    )
