"""A child process that writes to a relation store, for the crash and concurrency tests.

``python -m tests.graphstore.driver apply URL [--pause-at K]`` applies :func:`crash_batch`;
``load URL [--pause-at K]`` loads :func:`base_graph`; with ``--pause-at K`` the child says
``{"event": "paused"}`` after its K-th chunk (mid-transaction; K = -1: once committed) and
waits there to be killed. ``merge URL WORKER BATCHES`` runs a small merge, batch after
batch, with the read -> decide -> apply -> re-read-on-conflict loop a merge uses.
Events are JSON lines on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections.abc import Callable

import orjson

from relmerge.graphstore import Batch, PairState, RelationStore, open_graph_store, pair_of
from relmerge.model import ExtractedRelation
from tests.graphstore.graphs import joined, relation, versions

BASE = 3000
INSERTS = 4000
UPDATES = 2000
WORKER_PAIRS = 12
NAMES = ("knows", "met", "advises")


def say(event: str, **fields: object) -> None:
    sys.stdout.write(orjson.dumps({"event": event, **fields}).decode() + "\n")
    sys.stdout.flush()


def base_graph() -> list[ExtractedRelation]:
    """One relation per pair, pairs e_i - e_(i+1)."""
    return [relation(f"b{i}", f"e_{i}", f"e_{i + 1}") for i in range(BASE)]


async def crash_batch(store: RelationStore) -> Batch:
    """4,000 new relations (most in stored pairs) and 2,000 stored ones joined by a new
    mention each: 6 chunks of writes, then the mapping and the decisions."""
    inserts = [relation(f"n{i}", f"e_{i}", f"e_{i + 1}", name="advises") for i in range(INSERTS)]
    states = await store.relations_for_pairs(
        [pair_of(f"e_{i}", f"e_{i + 1}") for i in range(INSERTS)]
    )
    updates = [
        joined(
            states[pair_of(f"e_{i}", f"e_{i + 1}")].relations[0],
            relation(f"u{i}", source_chunk_ids=[f"chunk_u{i}"]),
        )
        for i in range(UPDATES)
    ]
    mapping = {r.relation_id: r.relation_id for r in inserts}
    mapping.update({f"u{i}": f"b{i}" for i in range(UPDATES)})
    decisions = [{"member_ids": [f"u{i}", f"b{i}"], "verdict": "merge"} for i in range(UPDATES)]
    return Batch("crash", versions(states), inserts, updates, mapping, decisions, fingerprint="c")


def pausing(pause_at: int | None) -> Callable[[int], None]:
    ticks = [0]

    def progress(_: int) -> None:
        ticks[0] += 1
        if ticks[0] == pause_at:
            say("paused", at=pause_at)
            time.sleep(3600)  # killed here, in the middle of the transaction

    return progress


async def apply(url: str, pause_at: int | None) -> None:
    async with open_graph_store(url) as store:
        result = await store.apply_batch(await crash_batch(store), pausing(pause_at))
        say("done", status=result.status, counts=result.counts.to_dict())
        if pause_at == -1:
            say("paused", at=-1)
            time.sleep(3600)


async def load(url: str, pause_at: int | None) -> None:
    async with open_graph_store(url) as store:
        result = await store.load(base_graph(), batch_id="base", progress=pausing(pause_at))
        say("done", status=result.status, counts=result.counts.to_dict())


def worker_inputs(worker: int, batch: int) -> list[ExtractedRelation]:
    """New mentions in a few shared pairs: each worker's own, and some both workers have
    (the same input id and content, as when one batch is merged by two processes)."""
    rng = random.Random(worker * 1000 + batch)
    inputs = []
    for k in range(6):
        i = rng.randrange(WORKER_PAIRS)
        name = rng.choice(NAMES)
        inputs.append(
            relation(f"w{worker}-{batch}-{k}", f"p_{i}", f"p_{i + 1}", name=name, attributes={})
        )
    shared = batch % WORKER_PAIRS
    inputs.append(relation(f"s-{batch}", f"p_{shared + 1}", f"p_{shared}", name="met"))
    return inputs


def decide(
    inputs: list[ExtractedRelation],
    states: dict[tuple[str, str], PairState],
    folded: dict[str, str],
) -> tuple[list[ExtractedRelation], dict[str, ExtractedRelation], dict[str, str]]:
    """The toy merge: same pair and same name is the same fact (chunk ids joined)."""
    inserts: dict[str, ExtractedRelation] = {}
    updates: dict[str, ExtractedRelation] = {}
    mapping: dict[str, str] = {}
    for new in inputs:
        if new.relation_id in folded:
            mapping[new.relation_id] = folded[new.relation_id]
            continue
        pair = pair_of(new.source_entity_id, new.target_entity_id)
        current = {r.relation_id: r for r in states[pair].relations}
        current.update({k: v for k, v in updates.items() if k in current})
        current.update(
            {
                k: v
                for k, v in inserts.items()
                if pair_of(v.source_entity_id, v.target_entity_id) == pair
            }
        )
        match = next((r for r in current.values() if r.name == new.name), None)
        if match is None:
            inserts[new.relation_id] = new
            mapping[new.relation_id] = new.relation_id
        else:
            target = inserts if match.relation_id in inserts else updates
            target[match.relation_id] = joined(match, new)
            mapping[new.relation_id] = match.relation_id
    return list(inserts.values()), updates, mapping


async def merge_one(store: RelationStore, batch_id: str, inputs: list[ExtractedRelation]) -> int:
    """Read, decide, apply; on a conflict re-read the pairs that moved and decide again.
    Returns how many conflicts it met."""
    pairs = [pair_of(r.source_entity_id, r.target_entity_id) for r in inputs]
    states = await store.relations_for_pairs(pairs)
    conflicts = 0
    while True:
        folded = await store.folded([r.relation_id for r in inputs])  # after the pairs
        inserts, updates, mapping = decide(inputs, states, folded)
        batch = Batch(batch_id, versions(states), inserts, list(updates.values()), mapping)
        result = await store.apply_batch(batch)
        if result.status != "conflict":
            return conflicts
        conflicts += 1
        states.update(await store.relations_for_pairs(list(result.conflicts)))


async def merge(url: str, worker: int, batches: int) -> None:
    async with open_graph_store(url) as store:
        await store.info()  # connected and checked before the start
        sys.stdin.readline()  # the start signal: both workers begin together
        conflicts = 0
        for batch in range(batches):
            conflicts += await merge_one(store, f"w{worker}-{batch}", worker_inputs(worker, batch))
        say("done", conflicts=conflicts)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("apply", "load", "merge"))
    parser.add_argument("url")
    parser.add_argument("numbers", nargs="*", type=int)
    parser.add_argument("--pause-at", type=int)
    args = parser.parse_args()
    if args.mode == "apply":
        asyncio.run(apply(args.url, args.pause_at))
    elif args.mode == "load":
        asyncio.run(load(args.url, args.pause_at))
    else:
        asyncio.run(merge(args.url, *args.numbers))


if __name__ == "__main__":
    main()
