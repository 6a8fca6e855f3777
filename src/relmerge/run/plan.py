"""``relmerge run --dry-run``: count the work before spending anything.

Records, exact groups, blocks and candidate pairs come from what intake keeps of each
record anyway (its exact key's and block's hashes, its endpoints' numbers): no record is
parsed twice and none is held, so a dry run over a 200 MB batch stays small. The largest
blocks are named, because one generic node ("the company") can gather a block whose
pairs are most of the batch's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from relmerge.errors import InputError
from relmerge.io.records import RawRecord, Rejected
from relmerge.model import ExtractedRelation
from relmerge.prompts.base import inert_json
from relmerge.prompts.context import directed_record
from relmerge.run.intake import CountingSpool, Intake, take_in
from relmerge.stages.remap import validate_entity_mapping

LARGEST_BLOCKS = 5


@dataclass(frozen=True)
class Block:
    """One candidate block: an endpoint pair (as its first record has it) and its size."""

    source_id: str
    source_name: str
    target_id: str
    target_name: str
    records: int

    @property
    def pairs(self) -> int:
        return self.records * (self.records - 1) // 2


@dataclass
class Plan:
    """The counts of the dry-run table, the rejected records, the largest blocks, the
    size of every block and every exact group of two records or more, and the characters
    of all records as a prompt shows them (for the token estimate, ``run.estimate``)."""

    counts: dict[str, int]
    rejected: list[Rejected] = field(default_factory=list)
    largest: list[Block] = field(default_factory=list)
    block_sizes: list[int] = field(default_factory=list)
    group_sizes: list[int] = field(default_factory=list)
    record_chars: int = 0


class SizingSpool(CountingSpool):
    """A counting spool that adds up each record's characters as a prompt shows it."""

    def __init__(self, limit: int, description_chars: int) -> None:
        super().__init__(limit)
        self.description_chars = description_chars
        self.chars = 0

    def add(self, index: int, relation: ExtractedRelation) -> None:
        ends = (relation.source_entity_id, relation.target_entity_id)
        shown = directed_record(relation, ends, self.description_chars)
        self.chars += len(inert_json(shown, indent=True)) + 2  # ",\n" between records


def plan(
    raws: Iterable[RawRecord],
    entity_id_mapping: Any,
    records_per_chunk: int = 50_000,
    largest: int = LARGEST_BLOCKS,
    description_chars: int = 2000,
) -> Plan:
    """Read the input once as a run does (checked, remapped) and count what a run would
    decide: exact groups and blocks never span chunks, so the batch-wide counts are the
    sums a run's chunks would make. No embedding, no LLM, nothing written."""
    mapping = validate_entity_mapping(entity_id_mapping)
    # The relations themselves are not needed: none is kept, in memory or on disk.
    spool = SizingSpool(records_per_chunk, description_chars)
    intake = take_in(raws, mapping, records_per_chunk, spool=spool)
    if intake.record_count == 0:
        raise InputError("the input holds no relation records")
    groups = _sizes(intake.key_hashes)
    blocks = _sizes(intake.hashes)
    counts = {
        "input_record_count": intake.record_count,
        "rejected_count": len(intake.rejected),
        "input_relation_count": len(intake.ids),
        "self_loops_after_mapping": len(intake.passthrough),
        "exact_groups_with_duplicates": int((groups > 1).sum()),
        "records_in_exact_groups": int(groups[groups > 1].sum()),
        "blocks": int(blocks.size),
        "multi_record_blocks": int((blocks > 1).sum()),
        "largest_block": int(blocks.max(initial=0)),
        "candidate_pairs": sum(int(n) * (int(n) - 1) // 2 for n in blocks[blocks > 1]),
    }
    multi = [int(n) for n in blocks[blocks > 1]]
    duplicated = [int(n) for n in groups[groups > 1]]
    chosen = _largest_blocks(intake, largest)
    return Plan(counts, intake.rejected, chosen, multi, duplicated, spool.chars)


def _sizes(hashes: Iterable[int]) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Records per distinct hash."""
    _, counts = np.unique(np.asarray(hashes, dtype=np.int64), return_counts=True)
    return counts.astype(np.int64)


def _largest_blocks(intake: Intake, limit: int) -> list[Block]:
    """The ``limit`` largest blocks of two records or more, largest first (first seen
    first among equals), each named by its first record's endpoints."""
    hashes = np.asarray(intake.hashes, dtype=np.int64)
    _, first, counts = np.unique(hashes, return_index=True, return_counts=True)
    order = np.lexsort((first, -counts))[:limit]
    chosen = [(int(first[i]), int(counts[i])) for i in order if counts[i] > 1]
    if not chosen:
        return []
    ends = np.asarray(intake.ends, dtype=np.int64).reshape(-1, 2)
    names = np.asarray(intake.end_names, dtype=np.int64).reshape(-1, 2)
    wanted_ids = {int(n) for row, _ in chosen for n in ends[row]}
    wanted_names = {int(n) for row, _ in chosen for n in names[row]}
    entity = {n: key for key, n in intake.entity_numbers.items() if n in wanted_ids}
    name = {n: key for key, n in intake.name_numbers.items() if n in wanted_names}
    return [
        Block(
            entity[int(ends[row, 0])],
            name[int(names[row, 0])],
            entity[int(ends[row, 1])],
            name[int(names[row, 1])],
            size,
        )
        for row, size in chosen
    ]
