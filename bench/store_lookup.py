"""Relation store benchmark: does the cost of a merge follow the batch, not the store?

For each store size N (default 10k and 1M) the script fills a fresh store with N synthetic
relations (``bench/synthetic.generate``: real-shaped, mostly one relation per entity
pair), then times what a merge of a 10k batch asks of the store:

- ``lookup``: ``relations_for_pairs`` for the pairs of the 10k new relations (half of them
  restate stored facts, half are in pairs the store has never seen); ``lookup unknown``:
  the unseen pairs alone (index probes that find nothing, whatever N);
- ``folded``: ``folded`` for their 10k input ids;
- ``apply``: ``apply_batch`` of the result (joins as updates, the rest as inserts, the
  10k-id mapping), one transaction with its change log.

The fill (``load``, one logged batch) is timed too, for scale. SQLite always (a file in a
temporary folder); PostgreSQL too with ``--postgres URL`` (a database the script may use:
each size gets a schema of its own, dropped at the end)::

    .venv/bin/python bench/store_lookup.py
    .venv/bin/python bench/store_lookup.py --sizes 10000,100000 --postgres postgresql:///bench
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from relmerge.graphstore import Batch, RelationStore, open_graph_store, pair_of
from relmerge.model import ExtractedRelation
from synthetic import generate  # bench/ is on sys.path when this file runs as a script

BATCH = 10_000


def stored_graph(size: int) -> Iterator[ExtractedRelation]:
    for record in generate(size, seed=0):
        yield ExtractedRelation.model_validate(record)


def new_batch(size: int, count: int) -> list[ExtractedRelation]:
    """Half new mentions of stored facts (same pair, name and type; a new chunk), half
    relations between entities the store does not know."""
    rng = random.Random(1)
    stored = generate(size, seed=0)
    restated = []
    for k in range(count // 2):
        base = stored[rng.randrange(size)]
        restated.append(
            {
                **base,
                "relation_id": f"new_{k}",
                "chunk_id": f"chunk_new_{k}",
                "source_chunk_ids": [f"chunk_new_{k}"],
            }
        )
    fresh = []
    for k, record in enumerate(generate(count - count // 2, seed=7)):
        fresh.append(
            {
                **record,
                "relation_id": f"fresh_{k}",
                "source_entity_id": "x_" + record["source_entity_id"],
                "target_entity_id": "x_" + record["target_entity_id"],
            }
        )
    return [ExtractedRelation.model_validate(r) for r in restated + fresh]


def decide(
    new: list[ExtractedRelation], states: dict[tuple[str, str], Any], folded: dict[str, str]
) -> Batch:
    """A stand-in for the merge's decisions: same pair, name and type is the same fact."""
    inserts: dict[str, ExtractedRelation] = {}
    updates: dict[str, ExtractedRelation] = {}
    mapping: dict[str, str] = {}
    for relation in new:
        if relation.relation_id in folded:
            mapping[relation.relation_id] = folded[relation.relation_id]
            continue
        pair = pair_of(relation.source_entity_id, relation.target_entity_id)
        known = [*(updates.get(r.relation_id, r) for r in states[pair].relations)]
        known += [
            r for r in inserts.values() if pair_of(r.source_entity_id, r.target_entity_id) == pair
        ]
        match = next((r for r in known if (r.name, r.type) == (relation.name, relation.type)), None)
        if match is None:
            inserts[relation.relation_id] = relation
            mapping[relation.relation_id] = relation.relation_id
            continue
        chunks = list(dict.fromkeys([*match.source_chunk_ids, *relation.source_chunk_ids]))
        joined = match.model_copy(update={"source_chunk_ids": chunks})
        (inserts if match.relation_id in inserts else updates)[match.relation_id] = joined
        mapping[relation.relation_id] = match.relation_id
    versions = {pair: state.version for pair, state in states.items()}
    return Batch("bench", versions, list(inserts.values()), list(updates.values()), mapping)


@contextmanager
def timed(figures: dict[str, Any], name: str) -> Iterator[None]:
    started = time.perf_counter()
    yield
    figures[name] = time.perf_counter() - started


async def measure(store: RelationStore, size: int) -> dict[str, Any]:
    figures: dict[str, Any] = {"N": size}
    await store.init()
    with timed(figures, "fill s"):
        await store.load(stored_graph(size), batch_id="fill")
    new = new_batch(size, BATCH)
    pairs = [pair_of(r.source_entity_id, r.target_entity_id) for r in new]
    with timed(figures, "lookup s"):
        states = await store.relations_for_pairs(pairs)
    unknown = [pair for pair in pairs if pair[0].startswith("x_")]
    with timed(figures, "lookup unknown s"):  # index probes alone: nothing to return
        await store.relations_for_pairs(unknown)
    with timed(figures, "folded s"):
        folded = await store.folded([r.relation_id for r in new])
    batch = decide(new, states, folded)
    with timed(figures, "apply s"):
        result = await store.apply_batch(batch)
    assert result.status == "applied", result
    figures["pairs"] = len(states)
    figures["stored found"] = sum(len(s.relations) for s in states.values())
    figures["inserted"] = result.counts.inserted
    figures["updated"] = result.counts.updated
    return figures


@contextmanager
def postgres_schema(url: str, size: int) -> Iterator[str]:
    """A schema of its own in the server's database: the store's URL, dropped after."""
    import psycopg

    schema = f"relmerge_bench_{size}"
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        connection.execute(f"CREATE SCHEMA {schema}")
    try:
        yield url + ("&" if "?" in url else "?") + f"options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


async def run(sizes: list[int], postgres: str | None) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        with tempfile.TemporaryDirectory() as folder:
            async with open_graph_store(f"sqlite:///{folder}/graph.db") as store:
                rows.append({"backend": "sqlite", **await measure(store, size)})
        print_row(rows[-1])
        if postgres:
            with postgres_schema(postgres, size) as url:
                async with open_graph_store(url) as store:
                    rows.append({"backend": "postgresql", **await measure(store, size)})
            print_row(rows[-1])
    return rows


COLUMNS = (
    "backend",
    "N",
    "fill s",
    "lookup s",
    "lookup unknown s",
    "folded s",
    "apply s",
    "pairs",
    "stored found",
    "inserted",
    "updated",
)


def print_row(row: dict[str, Any]) -> None:
    cells = [
        f"{row[c]:.2f}"
        if isinstance(row[c], float)
        else f"{row[c]:,}"
        if isinstance(row[c], int)
        else str(row[c])
        for c in COLUMNS
    ]
    print(" | ".join(cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,1000000", help="store sizes, comma-separated")
    parser.add_argument("--postgres", help="also a PostgreSQL database at this URL")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"batch of {BATCH:,} new relations; times in seconds")
    print(" | ".join(COLUMNS))
    asyncio.run(run(sizes, args.postgres))


if __name__ == "__main__":
    main()
