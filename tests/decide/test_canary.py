"""The canary kernel: which pairs are certain and their seeded choice (the verdict on the
answers: ``test_sequential.py``)."""

from __future__ import annotations

from relmerge.decide.canary import Canary, block_candidates, pick
from relmerge.decide.tiers import PairDecision
from relmerge.model import EntityContext, ExtractedRelation
from relmerge.units import Unit
from tests.factories import record


def _canary(key: str, expected: str) -> Canary:
    ends = (EntityContext("a", "A"), EntityContext("b", "B"))
    return Canary(({"relation_id": "x"}, {"relation_id": "y"}), ends, expected, key)  # type: ignore[arg-type]


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
