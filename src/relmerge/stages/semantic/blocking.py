"""Candidate blocks: the records of one canonical endpoint pair, taken unordered.

A merge never joins two blocks (that would be an entity merge), so pairs are only ever
compared inside a block: work grows with the sum of squared block sizes, not with N².
"""

from __future__ import annotations

from collections.abc import Sequence

from relmerge.units import Unit

BlockKey = frozenset[str]


def block_key(unit: Unit) -> BlockKey:
    return frozenset((unit.relation.source_entity_id, unit.relation.target_entity_id))


def make_blocks(units: Sequence[Unit]) -> dict[BlockKey, list[int]]:
    """Unit indices per block, in input order; blocks keep first-seen order."""
    blocks: dict[BlockKey, list[int]] = {}
    for index, unit in enumerate(units):
        blocks.setdefault(block_key(unit), []).append(index)
    return blocks


def block_pair_counts(blocks: dict[BlockKey, list[int]]) -> dict[str, int]:
    """How many comparisons blocking leaves (count before you spend)."""
    sizes = [len(members) for members in blocks.values()]
    return {
        "blocks": len(sizes),
        "multi_record_blocks": sum(1 for n in sizes if n > 1),
        "largest_block": max(sizes, default=0),
        "candidate_pairs": sum(n * (n - 1) // 2 for n in sizes),
    }


def add_pair_counts(total: dict[str, int], counts: dict[str, int]) -> None:
    """Add one chunk's :func:`block_pair_counts` to ``total`` (largest block: the max)."""
    for key, value in counts.items():
        total[key] = (
            max(total.get(key, 0), value) if key == "largest_block" else (total.get(key, 0) + value)
        )
