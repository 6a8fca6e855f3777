"""A stored relation is embedded once: a later merge that meets it again reads its vector
from the store (``run/store_vectors.py``), so a merge's embedding follows its batch.
Counts only: speed is measured by ``bench/store_merge_speed.py``."""

from __future__ import annotations

import asyncio
from typing import Any

from relmerge import DeduplicateRelationsConfig, ExtractedRelation, StoreMerge
from relmerge.graphstore import open_graph_store
from relmerge.providers.embedding import HashEmbedder
from tests.factories import record

STORED = record(
    "s1", name="CEO of", description="Norrbeck Systems named Ada Lind chief executive in 2019."
)
FIRST = record("n1", name="sponsor of", description="Ada Lind sponsors a rowing club in Malmo.")
SECOND = record("n2", name="author of", description="Ada Lind wrote a book about sailing.")


def test_a_later_merge_reads_the_stored_relations_vectors_from_the_store(store_url: str) -> None:
    async def go() -> list[Any]:
        results = []
        async with open_graph_store(store_url) as store:
            await store.init()
            await store.load([ExtractedRelation(**STORED)], batch_id="base")
            for batch in ([FIRST], [SECOND]):
                merge = StoreMerge(store, DeduplicateRelationsConfig(), embedder=HashEmbedder())
                output = await merge.merge(batch)
                assert output.result.status == "applied"
                results.append(output)
        return results

    first, second = asyncio.run(go())
    assert first.mapping == {"n1": "n1"} and second.mapping == {"n2": "n2"}
    # First merge: nothing cached yet; s1 and n1 (descriptions and names) computed.
    assert first.result.vectors_from_store == 0
    assert first.result.vectors_computed == 4
    assert first.result.stored_relations_read == 1
    # Second: s1 and n1 are stored now and read back, never embedded again; only n2's
    # description and name are computed.
    assert second.result.stored_relations_read == 2
    assert second.result.vectors_computed == 2
    assert second.result.vectors_from_store == 4
