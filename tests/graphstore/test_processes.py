"""Crash safety and concurrency with real processes, on both backends.

A child applying a large batch is killed with SIGKILL at several points of its
transaction: the store then holds nothing of the batch, and applying it again gives what
an uninterrupted apply gives. Two processes merging batches into the same pairs at once
lose nothing and insert nothing twice.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from relmerge.graphstore import RelationStore, open_graph_store, pair_of
from relmerge.model import ExtractedRelation
from tests.graphstore import driver
from tests.graphstore.conftest import sqlite_url
from tests.support.postgres import PostgresServer

ROOT = Path(__file__).resolve().parents[2]


def child(*args: str) -> subprocess.Popen[bytes]:
    # ``-m`` from the checkout's root: ``tests`` is importable, relmerge is what is installed.
    return subprocess.Popen(
        [sys.executable, "-m", "tests.graphstore.driver", *args],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def events(process: subprocess.Popen[bytes]) -> list[dict[str, object]]:
    try:
        out, err = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    assert process.returncode == 0, err.decode()[-3000:]
    return [orjson.loads(line) for line in out.splitlines()]


def kill_when_paused(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child once it says it paused (and whatever happens: no child outlives
    its test)."""
    assert process.stdout is not None
    try:
        while True:
            line = process.stdout.readline()
            if not line:
                raise AssertionError(process.communicate(timeout=60)[1].decode()[-3000:])
            if orjson.loads(line)["event"] == "paused":
                break
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL


async def dumped(store: RelationStore) -> list[ExtractedRelation]:
    return [r async for r in store.dump()]


def another_url(store_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """An empty store of the same backend as ``store_url``."""
    if store_url.startswith("sqlite:"):
        (tmp_path / "reference").mkdir()
        return sqlite_url(tmp_path / "reference")
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.new_database()


async def test_a_batch_killed_mid_transaction_leaves_nothing_and_applies_again_whole(
    store_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    reference_url = another_url(store_url, tmp_path, request)
    async with open_graph_store(reference_url) as reference:
        await reference.init()
        await reference.load(driver.base_graph(), batch_id="base")
        uninterrupted = await reference.apply_batch(await driver.crash_batch(reference))
        expected = await dumped(reference)
    async with open_graph_store(store_url) as store:
        await store.init()
        await store.load(driver.base_graph(), batch_id="base")
        before = await dumped(store)
    # Chunks: 4 of inserts, 2 of updates; 6 = all rows written, mapping and commit to come.
    for pause_at in (1, 4, 6):
        kill_when_paused(child("apply", store_url, "--pause-at", str(pause_at)))
        async with open_graph_store(store_url) as store:
            assert await dumped(store) == before, f"killed after chunk {pause_at}"
            assert await store.batch("crash") is None
            assert await store.folded(["n0", "u0", f"n{driver.INSERTS - 1}"]) == {}
            states = await store.relations_for_pairs([pair_of("e_0", "e_1")])
            assert states[pair_of("e_0", "e_1")].version == 1
    done = events(child("apply", store_url))
    assert done[-1] == {
        "event": "done",
        "status": "applied",
        "counts": uninterrupted.counts.to_dict(),
    }
    async with open_graph_store(store_url) as store:
        assert await dumped(store) == expected
        assert await store.batch_mapping("crash") == await _mapping(reference_url)


async def _mapping(url: str) -> dict[str, str]:
    async with open_graph_store(url) as store:
        return await store.batch_mapping("crash")


async def test_a_batch_killed_after_its_commit_is_all_there_and_not_applied_twice(
    store_url: str,
) -> None:
    async with open_graph_store(store_url) as store:
        await store.init()
        await store.load(driver.base_graph(), batch_id="base")
    kill_when_paused(child("apply", store_url, "--pause-at", "-1"))
    async with open_graph_store(store_url) as store:
        after = await dumped(store)
        record = await store.batch("crash")
        assert record is not None and record.counts.inserted == driver.INSERTS
        assert len(after) == driver.BASE + driver.INSERTS
    done = events(child("apply", store_url))
    assert done[-1]["status"] == "already_applied"
    async with open_graph_store(store_url) as store:
        assert await dumped(store) == after


async def test_a_load_killed_mid_way_leaves_an_empty_store(store_url: str) -> None:
    async with open_graph_store(store_url) as store:
        await store.init()
    kill_when_paused(child("load", store_url, "--pause-at", "2"))
    async with open_graph_store(store_url) as store:
        info = await store.info()
        assert (info.relations, info.pairs, info.batches) == (0, 0, 0)
    done = events(child("load", store_url))
    assert done[-1]["status"] == "applied"
    async with open_graph_store(store_url) as store:
        assert await dumped(store) == driver.base_graph()


async def test_two_processes_merging_into_the_same_pairs_lose_and_duplicate_nothing(
    store_url: str,
) -> None:
    batches = 30
    async with open_graph_store(store_url) as store:
        await store.init()
    workers = [child("merge", store_url, str(worker), str(batches)) for worker in (1, 2)]
    for process in workers:  # both are connected and waiting: start them together
        assert process.stdin is not None
        process.stdin.write(b"go\n")
        process.stdin.flush()
    for process in workers:
        assert events(process)[-1]["event"] == "done"
    inputs = {
        r.relation_id: r
        for worker in (1, 2)
        for batch in range(batches)
        for r in driver.worker_inputs(worker, batch)
    }
    async with open_graph_store(store_url) as store:
        stored = {r.relation_id: r for r in await dumped(store)}
        folded = await store.folded(list(inputs))
        info = await store.info(last=0)
    assert set(folded) == set(inputs), "an input id was lost"
    assert info.batches == 2 * batches
    # Nothing inserted twice: one stored relation per (pair, name), as the toy merge decides.
    keys = [(pair_of(r.source_entity_id, r.target_entity_id), r.name) for r in stored.values()]
    assert len(keys) == len(set(keys))
    expected_keys = {
        (pair_of(r.source_entity_id, r.target_entity_id), r.name) for r in inputs.values()
    }
    assert set(keys) == expected_keys
    # Nothing lost: every input's chunk ids are in the relation it was folded into.
    for input_id, relation in inputs.items():
        target = stored[folded[input_id]]
        assert set(relation.source_chunk_ids) <= set(target.source_chunk_ids), input_id
        assert (relation.name, pair_of(relation.source_entity_id, relation.target_entity_id)) == (
            target.name,
            pair_of(target.source_entity_id, target.target_entity_id),
        )
