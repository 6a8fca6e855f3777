"""Lookups by pair are indexed and batched: one statement per few hundred pairs, never one
per pair, whatever the store's size (the cost of a merge follows its batch)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from relmerge.graphstore import open_graph_store, pair_of
from relmerge.graphstore.db import CHUNK, Db
from relmerge.graphstore.reads import folded, pair_relations_sql, pair_states
from relmerge.graphstore.sqlite import SqliteDialect
from relmerge.graphstore.url import sqlite_path
from tests.graphstore.graphs import raw_rows, relation


@pytest.mark.parametrize("reconciled", [False, True])
async def test_the_pair_lookup_uses_the_pair_index(store_url: str, reconciled: bool) -> None:
    # Both statements: with the absorbed ones left out (a store with an applied reconcile)
    # and without. The filter is NOT EXISTS: NOT IN over the absorbed ids was planned by
    # PostgreSQL as a filter over a scan of the whole table at 1M relations (a 10k merge:
    # 18 s instead of 2; bench/store_merge_speed.py --postgresql measures it).
    async with open_graph_store(store_url) as store:
        await store.init()
        await store.load([relation(f"r{i}", f"e_{i}", f"e_{i + 1}") for i in range(50)])
    # The statement the store runs, its two pairs written in (EXPLAIN takes no parameters).
    sql = pair_relations_sql(2, reconciled).replace(
        "(?, ?), (?, ?)", "('e_1', 'e_2'), ('e_3', 'e_4')"
    )
    if store_url.startswith("sqlite:"):
        plan = raw_rows(store_url, f"EXPLAIN QUERY PLAN {sql}")
    else:
        # A table this small is read whole unless told not to: the index must be usable.
        plan = raw_rows(f"{store_url}&options=-cenable_seqscan%3Doff", f"EXPLAIN {sql}")
    assert "relmerge_relations_pair" in " ".join(str(row) for row in plan), plan


async def test_thousands_of_pairs_take_a_statement_per_chunk(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'graph.db'}"
    async with open_graph_store(url) as store:
        await store.init()
        await store.load([relation(f"r{i}", f"e_{i}", f"e_{i + 1}") for i in range(3000)])
    connection = sqlite3.connect(sqlite_path(url), isolation_level=None)
    statements: list[str] = []
    connection.set_trace_callback(statements.append)
    db = Db(SqliteDialect(sqlite_path(url), url), connection)
    pairs = [(f"e_{i + 1}", f"e_{i}") for i in range(3000)] + [("e_x", "e_y")]
    with db.reading():
        states = pair_states(db, pairs)
        found = folded(db, [f"r{i}" for i in range(3000)])
    assert sum(len(s.relations) for s in states.values()) == 3000
    assert states[pair_of("e_x", "e_y")].version == 0 and len(found) == 3000
    selects = [s for s in statements if "SELECT" in s]
    chunks = -(-len(pairs) // CHUNK)
    # versions, relations per chunk of pairs; one per chunk of ids for folded, and one
    # look for an applied reconcile in each (none: the relations found and the ids found
    # stand for themselves)
    assert len(selects) == 2 * chunks + -(-3000 // CHUNK) + 2, len(selects)
    connection.close()
