from __future__ import annotations

from relmerge.model import ExtractedRelation
from relmerge.stages.semantic.blocking import block_pair_counts, make_blocks
from relmerge.units import Unit
from tests.factories import record


def unit(index: int, source: str, target: str) -> Unit:
    relation = ExtractedRelation.model_validate(
        record(f"r{index}", source_entity_id=source, target_entity_id=target)
    )
    return Unit(relation, (index,))


def test_blocks_are_unordered_endpoint_pairs_in_input_order() -> None:
    units = [unit(0, "a", "b"), unit(1, "c", "d"), unit(2, "b", "a"), unit(3, "a", "c")]
    blocks = make_blocks(units)
    assert list(blocks.values()) == [[0, 2], [1], [3]]
    assert block_pair_counts(blocks) == {
        "blocks": 3,
        "multi_record_blocks": 1,
        "largest_block": 2,
        "candidate_pairs": 1,
    }
