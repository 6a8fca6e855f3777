"""A large load leaves the query planner fresh statistics (PostgreSQL planned pair lookups
from stale ones after a bulk load: a merge into 1M rows ran twice as slow)."""

from __future__ import annotations

import asyncio

import pytest

from relmerge import ExtractedRelation
from relmerge.graphstore import engine, open_graph_store
from tests.factories import record


async def _load(url: str, count: int) -> int:
    async with open_graph_store(url) as store:
        await store.init()
        relations = [
            ExtractedRelation(**record(f"r{i}", source_entity_id=f"e{i}")) for i in range(count)
        ]
        result = await store.load(relations)
        found = await store.relations_for_pairs([("e3", "e_ada")])
        assert [r.relation_id for r in found[("e3", "e_ada")].relations] == ["r3"]
        return result.counts.inserted


def test_a_large_load_refreshes_the_planners_statistics(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine, "STATISTICS_AFTER", 50)
    assert asyncio.run(_load(store_url, 60)) == 60
    if store_url.startswith("postgresql:"):
        import psycopg

        with psycopg.connect(store_url) as connection:
            row = connection.execute(
                "SELECT reltuples FROM pg_class WHERE relname = 'relmerge_relations'"
            ).fetchone()
        assert row is not None and row[0] == 60  # analysed: -1 before any ANALYZE
