"""Intake: records parked in memory or in the spool file come back equal; chunks hold
whole blocks, every record once, in input order."""

from __future__ import annotations

import os
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from relmerge.io.records import RawRecord
from relmerge.model import ExtractedRelation
from relmerge.run.intake import block_hash, plan_chunks, take_in
from tests.factories import record


def _raws(pairs: list[tuple[int, int]]) -> list[RawRecord]:
    return [
        RawRecord(
            f"input:{i}",
            record(
                f"r{i}",
                source_entity_id=f"e{a}",
                target_entity_id=f"e{b}",
                description=f"fact {i} with ünïcode 和 {{braces}}",
                attributes={"year": str(1900 + i)},
            ),
        )
        for i, (a, b) in enumerate(pairs)
    ]


def test_spooled_relations_come_back_equal() -> None:
    raws = _raws([(1, 2), (2, 1), (3, 4), (5, 6)] * 5)
    in_memory = take_in(raws, {}, records_per_chunk=100)
    on_disk = take_in(raws, {}, records_per_chunk=3)
    assert not in_memory.spool.on_disk and on_disk.spool.on_disk
    indices = list(range(len(raws)))
    expected = [ExtractedRelation.model_validate(raw.data) for raw in raws]
    assert list(in_memory.spool.load(indices).values()) == expected
    assert list(on_disk.spool.load(reversed(indices)).values()) == expected[::-1]
    on_disk.spool.close()


def test_intake_keeps_rejects_and_self_loops_out_of_the_blocks() -> None:
    raws = [*_raws([(1, 2), (1, 3)]), RawRecord("input:bad", {"relation_id": "x"})]
    intake = take_in(raws, {"e3": "e1"}, records_per_chunk=10)
    assert intake.record_count == 3
    assert intake.ids == ["r0", "r1"]
    assert [reject.origin for reject in intake.rejected] == ["input:bad"]
    assert [index for index, _ in intake.passthrough] == [1]  # e1 -> e3 became a self-loop
    assert list(intake.mapped) == [0]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 12), st.integers(13, 25)), min_size=1, max_size=120),
    st.integers(1, 30),
)
def test_chunks_hold_whole_blocks_every_record_once(
    pairs: list[tuple[int, int]], per_chunk: int
) -> None:
    intake = take_in(_raws(pairs), {}, records_per_chunk=per_chunk)
    chunks = [chunk.tolist() for chunk in plan_chunks(intake, per_chunk)]
    assert sorted(i for chunk in chunks for i in chunk) == list(range(len(pairs)))
    assert all(chunk == sorted(chunk) for chunk in chunks)  # input order inside a chunk
    chunk_of_block: dict[frozenset[int], int] = {}
    for number, chunk in enumerate(chunks):
        for index in chunk:
            block = frozenset(pairs[index])
            assert chunk_of_block.setdefault(block, number) == number  # never split
    if len(pairs) <= per_chunk:
        assert len(chunks) == 1
    else:  # every chunk but the last reaches the size (a block is never cut to fit)
        assert all(len(chunk) >= per_chunk for chunk in chunks[:-1])
    intake.spool.close()


def test_block_hash_ignores_direction_and_is_the_same_in_every_process() -> None:
    a = ExtractedRelation.model_validate(record("a", source_entity_id="x", target_entity_id="y"))
    b = ExtractedRelation.model_validate(record("b", source_entity_id="y", target_entity_id="x"))
    assert block_hash(a) == block_hash(b)
    code = (
        "from relmerge.run.intake import block_hash; from relmerge.model import ExtractedRelation;"
        "from tests.factories import record;"
        "print(block_hash(ExtractedRelation.model_validate("
        "record('a', source_entity_id='x', target_entity_id='y'))))"
    )
    for seed in ("1", "2"):  # str hashes differ between these processes; chunks must not
        env = {**os.environ, "PYTHONHASHSEED": seed}
        found = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert int(found.stdout) == block_hash(a)
