"""Cost follows the batch, not the store: 10k new relations merged (no LLM, no semantic
stage) into a SQLite store of SMALL synthetic relations and into one of LARGE.

    PYTHONPATH=src python bench/store_merge_speed.py [--small 10000] [--large 1000000]
    PYTHONPATH=src:. python bench/store_merge_speed.py --postgresql --large 100000

``--postgresql``: the stores are databases of a throw-away PostgreSQL server (initdb in a
temporary folder, unix socket, as the tests start it: ``tests/support/postgres.py``).

Prints per store size: build time, merge wall time, peak memory (RSS high-water mark of
a fresh process per merge), and the ratio large/small (target ≤ 2×, merge ≤ 60 s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from relmerge import DeduplicateRelationsConfig, ExtractedRelation, StoreMerge
from relmerge.graphstore import open_graph_store


def relation(i: int, prefix: str, pair: int) -> ExtractedRelation:
    """Real-shaped: mostly one relation per pair."""
    return ExtractedRelation(
        relation_id=f"{prefix}{i}",
        chunk_id=f"c{prefix}{i}",
        document_id="d",
        source_entity_id=f"e{pair}",
        target_entity_id=f"f{pair}",
        source_entity_name=f"E {pair}",
        target_entity_name=f"F {pair}",
        type="t",
        name="related to",
        description=f"E {pair} is related to F {pair} ({prefix}).",
        attributes={},
        source_chunk_ids=[f"c{prefix}{i}"],
    )


async def build(url: str, size: int) -> None:
    async with open_graph_store(url) as store:
        await store.init()
        await store.load((relation(i, "s", i) for i in range(size)), batch_id="base")


async def merge(url: str, size: int, batch: int) -> float:
    # Half the batch in stored pairs (joins or new facts there), half in new pairs.
    records = [relation(i, "n", i * 2 if i % 2 else size + i).to_dict() for i in range(batch)]
    async with open_graph_store(url) as store:
        started = time.perf_counter()
        output = await StoreMerge(store, DeduplicateRelationsConfig(semantic_merge=False)).merge(
            records
        )
        assert output.result.status == "applied"
        return time.perf_counter() - started


def child(url: str, size: int, batch: int) -> None:
    seconds = asyncio.run(merge(url, size, batch))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_mib": peak}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--postgresql", action="store_true", help="A PostgreSQL store.")
    parser.add_argument("--child", nargs=3)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]))
        return
    with contextlib.ExitStack() as stack:
        folder = stack.enter_context(tempfile.TemporaryDirectory())
        server = None
        if args.postgresql:
            from tests.support.postgres import postgres_server

            server = stack.enter_context(contextlib.contextmanager(postgres_server)())
        urls = {
            size: server.new_database() if server else f"sqlite:///{Path(folder) / f'g{size}.db'}"
            for size in (args.small, args.large)
        }
        measure(urls, args.batch)


def measure(urls: dict[int, str], batch: int) -> None:
    """Build each store, merge the batch in a fresh process, print the rows and ratio."""
    rows = {}
    for size, url in urls.items():
        started = time.perf_counter()
        asyncio.run(build(url, size))
        built = time.perf_counter() - started
        out = subprocess.run(
            [sys.executable, __file__, "--child", url, str(size), str(batch)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        rows[size] = {"build_s": round(built, 1), **json.loads(out)}
        print(
            f"store {size:>9,}: built in {built:6.1f} s; merge {batch:,} new: "
            f"{rows[size]['seconds']:6.2f} s, peak {rows[size]['peak_mib']:6.0f} MiB"
        )
    small, large = sorted(rows)
    ratio = rows[large]["seconds"] / rows[small]["seconds"]
    print(f"ratio large/small: {ratio:.2f}x (target <= 2x; merge <= 60 s)")


if __name__ == "__main__":
    main()
