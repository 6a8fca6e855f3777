"""The relation store's behaviour, one body for SQLite and PostgreSQL (``store_url``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from relmerge.errors import (
    InputError,
    RelationIdTakenError,
    StoreError,
    StoreSchemaError,
    UndoRefusedError,
)
from relmerge.graphstore import SCHEMA_VERSION, Batch, RelationStore, open_graph_store, pair_of
from relmerge.model import EntityContext, ExtractedRelation
from tests.graphstore.graphs import joined, merge_batch, raw_execute, raw_rows, relation


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[RelationStore]:
    async with open_graph_store(store_url) as opened:
        await opened.init()
        yield opened


async def dumped(store: RelationStore) -> list[ExtractedRelation]:
    return [r async for r in store.dump()]


def graph() -> list[ExtractedRelation]:
    """Two pairs; one stored reversed; a relation without attributes."""
    return [
        relation("r1"),
        relation("r2", "e_norrbeck", "e_ada", name="employs", type="employment"),
        relation("r3", "e_ada", "e_lund", name="born in", type="biography", attributes={}),
    ]


async def test_init_is_idempotent(store_url: str) -> None:
    async with open_graph_store(store_url) as store:
        assert await store.init() is True
        assert await store.init() is False
        info = await store.info()
    assert (info.schema_version, info.relations, info.batches) == (SCHEMA_VERSION, 0, 0)
    async with open_graph_store(store_url) as again:  # another connection, same answer
        assert await again.init() is False


async def test_a_store_of_another_schema_version_is_refused(store_url: str) -> None:
    async with open_graph_store(store_url) as store:
        await store.init()
    raw_execute(store_url, "UPDATE relmerge_meta SET value = '99' WHERE key = 'schema_version'")
    async with open_graph_store(store_url) as store:
        with pytest.raises(StoreSchemaError, match=r"schema version 99.*upgrade relmerge"):
            await store.info()
        with pytest.raises(StoreSchemaError, match="schema version 99"):
            await store.init()
    raw_execute(store_url, "UPDATE relmerge_meta SET value = '0' WHERE key = 'schema_version'")
    async with open_graph_store(store_url) as store:
        with pytest.raises(StoreSchemaError, match=r"older .* dump it"):
            await store.relations_for_pairs([("a", "b")])


async def test_a_database_that_is_not_a_store_is_refused(store_url: str) -> None:
    async with open_graph_store(store_url) as store:
        with pytest.raises(StoreSchemaError, match=r"no relmerge store at .*relmerge store init"):
            await store.info()
    raw_execute(store_url, "CREATE TABLE customers (id INTEGER)")
    async with open_graph_store(store_url) as store:
        with pytest.raises(StoreSchemaError, match=r"holds 1 other table\b"):
            await store.dump().__anext__()


async def test_load_then_dump_gives_back_every_field(store: RelationStore) -> None:
    relations = graph()
    result = await store.load(relations)
    assert result.status == "applied" and result.batch_id.startswith("load-")
    assert (result.counts.inserted, result.counts.mapped) == (3, 3)
    back = await dumped(store)
    assert [r.to_dict() for r in back] == [r.to_dict() for r in relations]
    assert [r.to_json() for r in back] == [r.to_json() for r in relations]  # byte for byte


async def test_loading_the_same_graph_again_changes_nothing(store: RelationStore) -> None:
    first = await store.load(graph())
    again = await store.load(graph())
    assert again.status == "already_applied" and again.batch_id == first.batch_id
    assert again.counts == first.counts
    named = await store.load(graph(), batch_id="import-2")  # the same records, stored as they are
    assert named.status == "applied" and named.counts.unchanged == 3 and named.counts.inserted == 0
    assert len(await dumped(store)) == 3


async def test_a_load_that_restates_a_stored_id_with_other_content_is_refused(
    store: RelationStore,
) -> None:
    await store.load(graph())
    before = await dumped(store)
    changed = relation("r1", description="Something else entirely.")
    with pytest.raises(RelationIdTakenError, match="'r1'"):
        await store.load([relation("r9"), changed])
    assert await dumped(store) == before
    assert (await store.info()).batches == 1


async def test_lookups_by_pair_in_either_order(store: RelationStore) -> None:
    await store.load(graph())
    forward = await store.relations_for_pairs([("e_ada", "e_norrbeck")])
    backward = await store.relations_for_pairs([("e_norrbeck", "e_ada"), ("e_x", "e_y")])
    pair = pair_of("e_ada", "e_norrbeck")
    assert [r.relation_id for r in forward[pair].relations] == ["r1", "r2"]
    assert backward[pair] == forward[pair] and backward[pair].version == 1
    assert backward[pair_of("e_x", "e_y")].version == 0
    assert backward[pair_of("e_x", "e_y")].relations == ()


async def test_lookups_of_many_pairs_are_batched(store: RelationStore) -> None:
    relations = [relation(f"r{i}", f"e_{i}", f"e_{i + 1}") for i in range(700)]
    await store.load(relations)
    pairs = [(f"e_{i + 1}", f"e_{i}") for i in range(0, 700, 2)] + [("e_0", "e_x")]
    states = await store.relations_for_pairs(pairs)
    assert len(states) == 351
    assert all(len(states[pair_of(*p)].relations) == 1 for p in pairs[:-1])


async def test_relations_entities_and_folded_ids_by_id(store: RelationStore) -> None:
    entities = [EntityContext("e_ada", "Ada Lind", "CEO since 2019", "person")]
    await store.load(graph(), entities=entities)
    found = await store.relations_by_id(["r3", "nope"])
    assert list(found) == ["r3"] and found["r3"] == graph()[2]
    assert await store.entities(["e_ada", "e_nobody"]) == {"e_ada": entities[0]}
    assert await store.folded(["r1", "r3", "n1"]) == {"r1": "r1", "r3": "r3"}


async def test_apply_batch_inserts_updates_maps_and_logs(store: RelationStore) -> None:
    await store.load(graph())
    pair = pair_of("e_ada", "e_norrbeck")
    states = await store.relations_for_pairs([pair, ("e_ada", "e_kim")])
    new_same_fact = relation("n1", chunk_id="chunk_n1", source_chunk_ids=["chunk_n1"])
    updated = joined(states[pair].relations[0], new_same_fact)
    fresh = relation("n2", "e_ada", "e_kim", name="mentors")
    decisions = [{"member_ids": ["r1", "n1"], "verdict": "merge", "tier": "identical"}]
    result = await store.apply_batch(
        merge_batch(
            "b1",
            states,
            inserts=[fresh],
            updates=[updated],
            mapping={"n1": "r1", "n2": "n2"},
            decisions=decisions,
            fingerprint="f1",
            entities=[EntityContext("e_kim", "Kim", None, "person")],
        )
    )
    assert result.status == "applied"
    assert (result.counts.inserted, result.counts.updated, result.counts.mapped) == (1, 1, 2)
    assert (await store.relations_by_id(["r1"]))["r1"].source_chunk_ids == [
        "chunk_r1",
        "chunk_shared",
        "chunk_n1",
    ]
    after = await store.relations_for_pairs([pair, ("e_kim", "e_ada")])
    assert after[pair].version == 2 and after[pair_of("e_ada", "e_kim")].version == 1
    assert await store.folded(["n1", "n2"]) == {"n1": "r1", "n2": "n2"}
    assert await store.batch_mapping("b1") == {"n1": "r1", "n2": "n2"}
    assert await store.batch_decisions("b1") == decisions
    record = await store.batch("b1")
    assert record is not None and (record.kind, record.fingerprint) == ("merge", "f1")
    log = raw_rows(
        store.url,  # the tests' URLs have no password to hide
        "SELECT c.kind, c.item_id, c.op, c.before IS NULL FROM relmerge_changes c "
        "JOIN relmerge_batches b ON b.seq = c.batch_seq WHERE b.batch_id = 'b1' "
        "ORDER BY c.position",
    )
    assert [tuple(row) for row in log] == [
        ("relation", "n2", "insert", True),
        ("relation", "r1", "update", False),
        ("entity", "e_kim", "insert", True),
    ]


async def test_the_same_batch_twice_changes_nothing_the_second_time(store: RelationStore) -> None:
    await store.load(graph())
    states = await store.relations_for_pairs([("e_ada", "e_kim")])
    batch = merge_batch("b1", states, inserts=[relation("n2", "e_ada", "e_kim")])
    assert (await store.apply_batch(batch)).status == "applied"
    before = await dumped(store)
    info = await store.info()
    again = await store.apply_batch(batch)
    assert again.status == "already_applied" and again.counts.inserted == 1
    assert await dumped(store) == before
    assert (await store.info()).batches == info.batches


async def test_undo_restores_exactly(store: RelationStore) -> None:
    await store.load(graph(), entities=[EntityContext("e_ada", "Ada", "old profile", None)])
    before = await dumped(store)
    entities_before = await store.entities(["e_ada", "e_kim"])
    pair = pair_of("e_ada", "e_norrbeck")
    states = await store.relations_for_pairs([pair, ("e_ada", "e_kim")])
    stored = states[pair].relations
    batch = merge_batch(
        "b1",
        states,
        inserts=[relation("n2", "e_ada", "e_kim")],
        updates=[
            joined(stored[0], relation("n1", source_chunk_ids=["chunk_n1"])),
            stored[1].model_copy(
                update={"description": "Merged: employs; hires.", "attributes": {}}
            ),
        ],
        mapping={"n1": "r1", "n2": "n2", "n3": "r2"},
        entities=[EntityContext("e_ada", "Ada Lind", "new profile", "person")],
    )
    assert (await store.apply_batch(batch)).status == "applied"
    assert await dumped(store) != before
    result = await store.undo("b1")
    assert (result.status, result.removed, result.restored) == ("undone", 1, 2)
    assert await dumped(store) == before
    assert await store.entities(["e_ada", "e_kim"]) == entities_before
    assert await store.folded(["n1", "n2", "n3"]) == {}
    assert (await store.undo("b1")).status == "already_undone"
    # The pair moved on: a batch built on the versions read before the undo conflicts.
    assert (await store.apply_batch(merge_batch("b2", states))).status == "conflict"


async def test_undo_is_refused_while_a_later_batch_builds_on_it(store: RelationStore) -> None:
    loaded = await store.load(graph())
    pair = pair_of("e_ada", "e_norrbeck")
    states = await store.relations_for_pairs([pair, ("e_ada", "e_kim")])
    r1 = states[pair].relations[0]
    await store.apply_batch(
        merge_batch(
            "b1",
            states,
            inserts=[relation("n2", "e_ada", "e_kim")],
            updates=[joined(r1, relation("n1", source_chunk_ids=["c1"]))],
            mapping={"n2": "n2", "n1": "r1"},
        )
    )
    states = await store.relations_for_pairs([("e_ada", "e_kim")])
    inserted = states[pair_of("e_ada", "e_kim")].relations[0]
    await store.apply_batch(
        merge_batch(
            "b2", states, updates=[joined(inserted, relation("n5", source_chunk_ids=["c5"]))]
        )
    )
    await store.apply_batch(merge_batch("b3", {}, mapping={"n6": "n2"}))  # folded into n2
    with pytest.raises(UndoRefusedError, match="b2, b3") as refused:
        await store.undo("b1")
    assert refused.value.later == ["b2", "b3"]
    with pytest.raises(UndoRefusedError, match="b1") as under:  # b1 changed r1 of the load
        await store.undo(loaded.batch_id)
    assert under.value.later == ["b1"]
    assert (await store.undo("b3")).status == "undone"
    assert (await store.undo("b2")).status == "undone"
    assert (await store.undo("b1")).status == "undone"
    assert [r.relation_id for r in await dumped(store)] == ["r1", "r2", "r3"]


async def test_an_undone_batch_id_can_be_applied_again(store: RelationStore) -> None:
    states = await store.relations_for_pairs([("e_ada", "e_kim")])
    batch = merge_batch("b1", states, inserts=[relation("n2", "e_ada", "e_kim")])
    await store.apply_batch(batch)
    await store.undo("b1")
    fresh = await store.relations_for_pairs([("e_ada", "e_kim")])
    assert (await store.apply_batch(merge_batch("b1", fresh, inserts=batch.inserts))).status == (
        "applied"
    )
    assert [r.relation_id for r in await dumped(store)] == ["n2"]


async def test_a_pair_changed_since_it_was_read_is_a_conflict(store_url: str) -> None:
    async with open_graph_store(store_url) as mine, open_graph_store(store_url) as theirs:
        await mine.init()
        await mine.load(graph())
        pair = pair_of("e_ada", "e_norrbeck")
        read = await mine.relations_for_pairs([pair, ("e_ada", "e_lund")])
        # Another writer joins a relation into the pair meanwhile.
        their_read = await theirs.relations_for_pairs([pair])
        stored = their_read[pair].relations[0]
        await theirs.apply_batch(
            merge_batch("theirs", their_read, updates=[joined(stored, relation("t1"))])
        )
        before = await dumped(mine)
        result = await mine.apply_batch(
            merge_batch(
                "mine",
                read,
                inserts=[relation("m1", "e_ada", "e_lund", name="visited")],
                updates=[joined(read[pair].relations[0], relation("m2"))],
                mapping={"m1": "m1", "m2": "r1"},
            )
        )
        assert result.status == "conflict" and result.conflicts == (pair,)
        assert await dumped(mine) == before
        assert await mine.batch("mine") is None and await mine.folded(["m1", "m2"]) == {}
        # Re-read just that pair, re-decide, apply: now it goes through.
        again = {**read, **(await mine.relations_for_pairs([pair]))}
        redo = merge_batch(
            "mine",
            again,
            inserts=[relation("m1", "e_ada", "e_lund", name="visited")],
            updates=[joined(again[pair].relations[0], relation("m2"))],
            mapping={"m1": "m1", "m2": "r1"},
        )
        assert (await mine.apply_batch(redo)).status == "applied"
        chunks = (await mine.relations_by_id(["r1"]))["r1"].source_chunk_ids
        assert chunks == ["chunk_r1", "chunk_shared", "chunk_t1", "chunk_m2"]


async def test_a_batch_must_give_the_version_of_each_pair_it_writes(store: RelationStore) -> None:
    with pytest.raises(StoreError, match="without its version"):
        await store.apply_batch(Batch("b1", {}, inserts=[relation("n1")]))
    with pytest.raises(StoreError, match="neither stored nor in the batch"):
        await store.apply_batch(Batch("b2", {}, mapping={"n1": "ghost"}))
    assert (await store.info()).batches == 0


async def test_an_update_keeps_the_relation_s_pair(store: RelationStore) -> None:
    await store.load(graph())
    states = await store.relations_for_pairs([("e_ada", "e_norrbeck"), ("e_ada", "e_kim")])
    moved = relation("r1", "e_ada", "e_kim")
    with pytest.raises(StoreError, match="keeps its endpoints"):
        await store.apply_batch(merge_batch("b1", states, updates=[moved]))
    with pytest.raises(StoreError, match="not stored"):
        await store.apply_batch(merge_batch("b1", states, updates=[relation("zz")]))


async def test_vectors_are_cached_by_embedder_and_text(store: RelationStore) -> None:
    one = b"\x00\x00\x80?"  # float32 1.0
    await store.put_vectors("use", {"a": one, "b": one * 2})
    await store.put_vectors("use", {"a": b"ignored: the first vector stays"})
    assert await store.vectors("use", ["a", "b", "c"]) == {"a": one, "b": one * 2}
    assert await store.vectors("hash", ["a"]) == {}


async def test_an_empty_load_stores_no_batch(store: RelationStore) -> None:
    with pytest.raises(InputError, match="nothing to load"):
        await store.load([])
    assert (await store.info()).batches == 0


async def test_a_batch_of_many_pairs_fits_the_server_s_lock_table(store: RelationStore) -> None:
    """8,000 pairs and 500 entity profiles in one batch: the PostgreSQL test server's
    lock table is small (tests/support/postgres.py), and one advisory lock per pair
    would overflow it ("out of shared memory")."""
    inserts = [relation(f"n{i}", f"e_{i}", f"e_{i + 1}") for i in range(8000)]
    states = await store.relations_for_pairs([pair_of(f"e_{i}", f"e_{i + 1}") for i in range(8000)])
    entities = [EntityContext(f"e_{i}", f"Entity {i}") for i in range(500)]
    result = await store.apply_batch(merge_batch("big", states, inserts=inserts, entities=entities))
    assert (result.status, result.counts.inserted, result.counts.entities) == ("applied", 8000, 500)
    assert (await store.info()).pairs == 8000
    assert (await store.undo("big")).removed == 8000
