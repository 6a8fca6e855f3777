"""Crash safety and concurrency of store merges, with real processes on both backends.

A child merging a batch is killed with SIGKILL before deciding, in the middle of its
write transaction, and once committed; the same merge run again then leaves the store
equal to an uninterrupted merge. Two children merging two batches that share facts into
one store at the same time duplicate nothing, lose nothing and apply both whole.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from relmerge.graphstore import open_graph_store
from tests.graphstore.test_processes import kill_when_paused
from tests.storemerge.batches import FOUNDED
from tests.storemerge.child import big_batch

ROOT = Path(__file__).resolve().parents[2]


def child(*args: str, module: str = "tests.storemerge.child") -> subprocess.Popen[bytes]:
    """``module`` (a child script of these tests) in a process of its own, from ROOT."""
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def finish(process: subprocess.Popen[bytes]) -> dict[str, Any]:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err.decode()[-3000:]
    answer: dict[str, Any] = orjson.loads(out.splitlines()[-1])
    return answer


async def _state(url: str) -> tuple[list[Any], dict[str, str]]:
    async with open_graph_store(url) as store:
        relations = [r async for r in store.dump()]
        ids = [r["relation_id"] for name in ("a", "b") for r in big_batch(name)]
        return relations, await store.folded(ids)


def state(url: str) -> tuple[list[Any], dict[str, str]]:
    return asyncio.run(_state(url))


@pytest.mark.parametrize("pause_at", [0, 1, 2, -1])
def test_a_killed_merge_run_again_equals_an_uninterrupted_one(
    store_url: str, tmp_path: Path, pause_at: int
) -> None:
    kill_when_paused(child(store_url, "a", "--pause-at", str(pause_at)))
    done = finish(child(store_url, "a"))
    assert done["status"] == ("already_applied" if pause_at == -1 else "applied")
    relations, folded = state(store_url)
    reference = f"sqlite:///{tmp_path / 'reference.db'}"
    finish(child(reference, "a"))
    expected, expected_folded = state(reference)
    assert sorted(r.to_json() for r in relations) == sorted(r.to_json() for r in expected)
    assert folded == expected_folded


def test_two_merges_at_once_duplicate_nothing_and_lose_nothing(store_url: str) -> None:
    first, second = child(store_url, "a"), child(store_url, "b")
    done = [finish(first), finish(second)]
    assert {d["status"] for d in done} == {"applied"}
    relations, folded = state(store_url)
    inputs = [r["relation_id"] for name in ("a", "b") for r in big_batch(name)]
    assert set(folded) == set(inputs)  # both batches fully applied
    founded = [r for r in relations if r.description == FOUNDED]
    assert len(founded) == 10  # the shared fact once per pair (e0..e9)
    # No lost update: every shared mention's chunk is in its pair's stored relation.
    chunks = {c for r in founded for c in r.source_chunk_ids}
    shared = [r for name in ("a", "b") for r in big_batch(name) if r["description"] == FOUNDED]
    assert {r["chunk_id"] for r in shared} <= chunks
    assert len(relations) == len(inputs) - len(shared) + 10
