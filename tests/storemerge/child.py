"""A child process that merges a batch into a store, for the crash and concurrency tests.

``python -m tests.storemerge.child URL NAME [--pause-at K]`` merges :func:`big_batch`
NAME (no LLM, no semantic stage); with ``--pause-at K`` it says ``{"event": "paused"}``
at point K and waits there to be killed: 0 before anything is decided, K > 0 after the
K-th chunk of the batch's write transaction, -1 once committed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

import orjson

from relmerge import DeduplicateRelationsConfig, StoreMerge
from relmerge.graphstore import open_graph_store
from tests.storemerge.batches import batch


def say(event: str, **fields: object) -> None:
    sys.stdout.write(orjson.dumps({"event": event, **fields}).decode() + "\n")
    sys.stdout.flush()


def pause(at: int) -> None:
    say("paused", at=at)
    time.sleep(3600)  # killed here


def big_batch(name: str) -> list[dict[str, Any]]:
    """3,000 relations, 50 of them a fact every batch states: 3 write chunks."""
    return batch(name, count=3000, shared=50)


async def main(url: str, name: str, pause_at: int | None) -> None:
    ticks = [0]

    def on_write(_: int) -> None:
        ticks[0] += 1
        if ticks[0] == pause_at:
            pause(pause_at)

    async def before(_: str) -> None:
        if pause_at == 0:
            pause(0)

    async with open_graph_store(url) as store:
        await store.init()
        merge = StoreMerge(store, DeduplicateRelationsConfig(semantic_merge=False))
        output = await merge.merge(big_batch(name), before_work=before, on_write=on_write)
        say("done", status=output.result.status, retries=output.result.conflict_retries)
        if pause_at == -1:
            pause(-1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("name")
    parser.add_argument("--pause-at", type=int)
    args = parser.parse_args()
    asyncio.run(main(args.url, args.name, args.pause_at))
