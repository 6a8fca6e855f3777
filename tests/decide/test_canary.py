"""The canary kernel: which pairs are certain, their seeded choice, the tally's verdict."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.canary import (
    Canary,
    CanaryTally,
    block_candidates,
    pick,
    surely_below,
    upper_bound,
)
from relmerge.decide.tiers import PairDecision
from relmerge.errors import ConfigError
from relmerge.model import EntityContext, ExtractedRelation
from relmerge.units import Unit
from tests.factories import record


def _canary(key: str, expected: str) -> Canary:
    ends = (EntityContext("a", "A"), EntityContext("b", "B"))
    return Canary(({"relation_id": "x"}, {"relation_id": "y"}), ends, expected, key)  # type: ignore[arg-type]


def test_the_tally_judges_only_after_the_minimum_and_stays_distrusted() -> None:
    tally = CanaryTally(minimum=10, threshold=0.8)
    for _ in range(9):
        tally.add(False)
    assert not tally.distrusted  # nine wrong answers are not yet enough to judge
    tally.add(None)  # no valid answer: asked, not counted
    assert tally.asked == 10 and tally.answered == 9 and not tally.distrusted
    tally.add(False)
    assert tally.distrusted and "0 of 10 certain questions right" in tally.reason()
    for _ in range(100):
        tally.add(True)
    assert tally.distrusted


def test_a_model_that_answers_right_is_trusted() -> None:
    tally = CanaryTally(minimum=10, threshold=0.8)
    for i in range(20):
        tally.add(i % 10 != 0)  # 90% right
    assert not tally.distrusted and tally.agreement == 0.9


def test_a_rolling_window_judges_the_recent_answers() -> None:
    tally = CanaryTally(minimum=4, threshold=0.75, window=4)
    for right in [True] * 20 + [False, False]:
        tally.add(right)
    assert tally.distrusted and tally.agreement is not None and tally.agreement > 0.9


@given(st.integers(0, 200), st.integers(1, 200))
def test_at_confidence_one_half_the_bound_is_the_agreement_itself(
    right: int, answered: int
) -> None:
    right = min(right, answered)
    assert upper_bound(right, answered, 0.5) == pytest.approx(right / answered)


@given(
    st.integers(0, 200),
    st.integers(1, 200),
    st.sampled_from([0.5, 0.75, 0.9, 0.95, 0.99]),
    st.sampled_from([0.75, 0.9, 0.95, 0.99, 0.999]),
)
def test_a_surer_verdict_asks_for_more_evidence(
    right: int, answered: int, low: float, high: float
) -> None:
    right = min(right, answered)
    if low > high:
        low, high = high, low
    bound = upper_bound(right, answered, high)
    assert right / answered - 1e-12 <= upper_bound(right, answered, low) <= bound + 1e-12
    assert bound <= 1.0 + 1e-12


def test_the_bound_is_the_wilson_score_interval() -> None:
    # The textbook 95% Wilson interval of 5 of 10 ends at 0.7634: a one-sided 0.975.
    assert upper_bound(5, 10, 0.975) == pytest.approx(0.7634, abs=5e-5)
    assert upper_bound(0, 0, 0.95) == 1.0  # nothing answered: nothing is sure


def test_more_answers_make_the_same_agreement_surely_below() -> None:
    assert not surely_below(7, 10, 0.8, 0.95)  # 70% of ten could be a good model's slips
    assert surely_below(70, 100, 0.8, 0.95)  # 70% of a hundred is not
    assert surely_below(7, 10, 0.8, 0.5)  # the point estimate stops it at once


def _slips_then_right(tally: CanaryTally) -> CanaryTally:
    """A good model's unlucky start: three slips in its first ten, then all right."""
    for right in [False, True, False, True, True, False, True, True, True, True] + [True] * 30:
        tally.add(right)
    return tally


def test_an_unlucky_start_stops_a_good_model_only_on_the_point_estimate() -> None:
    assert _slips_then_right(CanaryTally(minimum=10, threshold=0.8)).distrusted
    sure = _slips_then_right(CanaryTally(minimum=10, threshold=0.8, confidence=0.95))
    assert not sure.distrusted and sure.agreement == 0.925


def test_a_model_at_chance_is_still_stopped_by_the_surer_verdict() -> None:
    tally = CanaryTally(minimum=10, threshold=0.8, confidence=0.95)
    for i in range(40):
        tally.add(i % 2 == 0)
        if tally.distrusted:
            break
    assert tally.distrusted and tally.answered < 40
    assert "surely below 0.8 at 0.95 confidence" in tally.reason()
    assert "(canaries; below 0.8)" in _slips_then_right(CanaryTally(10, 0.8)).reason()


def test_the_verdict_waits_for_the_minimum_at_any_confidence() -> None:
    tally = CanaryTally(minimum=10, threshold=0.8, confidence=0.9)
    assert not tally.judges(0, 9) and tally.judges(0, 10)


def test_the_confidence_is_configured_and_bounded() -> None:
    assert DeduplicateRelationsConfig().canary_confidence == 0.5
    config = DeduplicateRelationsConfig(canary_confidence=0.9)
    assert CanaryTally.of(config, window=50).confidence == 0.9
    for wrong in (0.4, 1.0):
        with pytest.raises(
            ConfigError, match=r"canary_confidence: expected a number of at least 0\.5"
        ):
            DeduplicateRelationsConfig(canary_confidence=wrong)


def test_pick_alternates_answers_and_is_seeded() -> None:
    candidates = [_canary(f"k{i}", "keep_both") for i in range(6)]
    candidates += [_canary(f"m{i}", "merge") for i in range(2)]
    chosen = pick(candidates, 4, "seed")
    assert [c.expected for c in chosen].count("merge") == 2
    assert pick(list(reversed(candidates)), 4, "seed") == chosen


def test_a_directed_relation_against_its_reversed_twin_is_a_canary() -> None:
    forward = ExtractedRelation(**record("r1", source_entity_id="a", target_entity_id="b"))
    back = ExtractedRelation(**record("r2", source_entity_id="b", target_entity_id="a"))
    units = [Unit(forward, (0,)), Unit(back, (1,))]
    pairs = [PairDecision(0, 1, "keep", "direction", hard=True)]
    ends = (EntityContext("a", "A"), EntityContext("b", "B"))
    (canary,) = block_candidates(units, pairs, lambda i: {"relation_id": f"r{i + 1}"}, ends)
    assert canary.expected == "keep_both"
    assert {r["relation_id"] for r in canary.records} == {"r1", "r2"}
    # A pair the rules merely judged (a band, a guard) is never a canary.
    judged = [PairDecision(0, 1, "undecided", "band")]
    assert block_candidates(units, judged, lambda i: {"relation_id": str(i)}, ends) == []
