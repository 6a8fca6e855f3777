"""The canary kernel: which pairs are certain, their seeded choice, the tally's verdict."""

from __future__ import annotations

from relmerge.decide.canary import Canary, CanaryTally, block_candidates, pick
from relmerge.decide.tiers import PairDecision
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
