"""StoreMerge on both backends: new-vs-stored folds keep the stored id, stored pairs are
never merged, a batch merged twice changes nothing."""

from __future__ import annotations

import asyncio
from typing import Any

from relmerge import DeduplicateRelationsConfig, StoreMerge
from relmerge.graphstore import open_graph_store
from relmerge.providers.embedding import HashEmbedder
from tests.factories import record
from tests.storemerge.batches import FOUNDED, batch


async def _merge(url: str, records: list[dict[str, Any]]) -> Any:
    async with open_graph_store(url) as store:
        await store.init()
        merge = StoreMerge(store, DeduplicateRelationsConfig(), embedder=HashEmbedder())
        return await merge.merge(records)


async def _dump(url: str) -> list[Any]:
    async with open_graph_store(url) as store:
        return [relation async for relation in store.dump()]


def test_new_fact_joins_the_stored_one_and_keeps_its_id(store_url: str) -> None:
    first = asyncio.run(_merge(store_url, [record("a", description=FOUNDED)]))
    assert first.result.status == "applied" and first.mapping == {"a": "a"}
    second = asyncio.run(
        _merge(store_url, [record("b", description=FOUNDED), record("c", source_entity_id="z")])
    )
    assert second.mapping == {"b": "a", "c": "c"}
    stored = {r.relation_id: r for r in asyncio.run(_dump(store_url))}
    assert sorted(stored) == ["a", "c"]
    assert stored["a"].source_chunk_ids == ["chunk_a", "chunk_b"]
    assert second.result.joined_count == 1 and second.result.inserted_count == 1


def test_stored_duplicates_are_never_merged_again(store_url: str) -> None:
    async def go() -> Any:
        async with open_graph_store(store_url) as store:
            await store.init()
            # Loaded as is: two stored relations stating the same fact.
            await store.load(
                [
                    record_relation("s1", FOUNDED),
                    record_relation("s2", FOUNDED),
                ]
            )
            merge = StoreMerge(store, DeduplicateRelationsConfig(), embedder=HashEmbedder())
            return await merge.merge([record("n", description=FOUNDED)])

    output = asyncio.run(go())
    assert output.mapping["n"] in {"s1", "s2"}
    assert sorted(r.relation_id for r in asyncio.run(_dump(store_url))) == ["s1", "s2"]


def record_relation(relation_id: str, description: str) -> Any:
    from relmerge import ExtractedRelation

    return ExtractedRelation(**record(relation_id, description=description))


def test_merging_the_same_batch_twice_changes_nothing(store_url: str) -> None:
    records = batch("b1")
    first = asyncio.run(_merge(store_url, records))
    before = asyncio.run(_dump(store_url))
    second = asyncio.run(_merge(store_url, records))
    assert second.result.status == "already_applied"
    assert second.mapping == first.mapping
    assert asyncio.run(_dump(store_url)) == before


def test_three_batches_one_after_another_hold_one_copy_of_a_shared_fact(
    store_url: str,
) -> None:
    for name in ("b1", "b2", "b3"):
        asyncio.run(_merge(store_url, batch(name)))
    stored = asyncio.run(_dump(store_url))
    founded = [r for r in stored if r.description == FOUNDED]
    assert len(founded) == 5  # one per pair e0..e4, whatever the batch
    assert all(len(r.source_chunk_ids) == 3 for r in founded)


CEO_LINES = (
    "Ada Lind has led Norrbeck Systems as chief executive since the spring of 2019.",
    "Norrbeck's annual report lists Ada Lind at the head of the company's board too.",
)


def test_a_new_relation_meets_each_line_of_a_stored_description(store_url: str) -> None:
    """A stored relation that several inputs formed holds their descriptions joined by
    lines: a new relation stating one of them merges by the rules, as in one run."""

    async def go() -> Any:
        async with open_graph_store(store_url) as store:
            await store.init()
            await store.load([record_relation("s", "\n".join(CEO_LINES))])
            merge = StoreMerge(store, DeduplicateRelationsConfig(), embedder=HashEmbedder())
            return await merge.merge([record("n", description=CEO_LINES[1])])

    output = asyncio.run(go())
    assert output.mapping == {"n": "s"}
    tiers = [line["tier"] for line in output.decisions]
    assert tiers == ["fuzzy_high"]
    assert [r.relation_id for r in asyncio.run(_dump(store_url))] == ["s"]
