"""Cost follows the batch, not the store: 10k new relations merged (no LLM) into a store of
SMALL synthetic relations and into one of LARGE, with the default settings (semantic
stage on, the default embedder) and with the semantic stage off.

    PYTHONPATH=src python bench/store_merge_speed.py [--small 10000] [--large 1000000]
    PYTHONPATH=src python bench/store_merge_speed.py --semantic off   # one configuration
    PYTHONPATH=src:. python bench/store_merge_speed.py --postgresql --large 100000

The batch is the same work in both stores: half of it falls in pairs the store holds
(one stored relation each, spread over the whole store), half in pairs it does not. Each
store is built once (``load``); every merge then gets a fresh copy of it (a file copy;
PostgreSQL: ``CREATE DATABASE … TEMPLATE``) and runs in a fresh process, so a merge is
always the first into that store (the stored relations it meets have no cached vector
yet). ``--repeat`` rounds, each merging every configuration into both stores in turn,
so that a busy machine slows baseline and variant alike; the medians are printed.

``semantic on`` is the configuration a merge gets by default (``DeduplicateRelationsConfig()``
and the default embedder, ``providers.get_embedder``: multilingual USE, with its helper
process on two or more cores; no run cache, as ``merge-into --no-cache``); ``semantic
off`` is ``semantic_merge=False``.

``--postgresql``: the stores are databases of a throw-away PostgreSQL server (initdb in a
temporary folder, unix socket, as the tests start it: ``tests/support/postgres.py``).

Prints per configuration and store size: build time, merge wall time (median, and each
round's), peak memory (RSS high-water mark of the merge's process), and the ratio
large/small of the medians (target ≤ 2×, merge ≤ 60 s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from relmerge import DeduplicateRelationsConfig, ExtractedRelation, StoreMerge
from relmerge.graphstore import open_graph_store

CONFIGS = {"on": "semantic on (default)", "off": "semantic off"}


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


def batch_records(size: int, batch: int) -> list[dict[str, Any]]:
    """Odd i: a stored pair (spread over the store); even i: a pair the store has not.

    The same number of stored pairs whatever the store's size (an earlier layout put
    the odd ones at pair 2i, so that a store smaller than 2 × batch held only some of
    them: a merge into the large store then had twice the stored relations to decide
    against, and with the semantic stage on, twice the embedding)."""
    stride = max(1, size // batch)
    return [
        relation(i, "n", (i * stride) % size if i % 2 else size + i).to_dict() for i in range(batch)
    ]


async def build(url: str, size: int) -> None:
    async with open_graph_store(url) as store:
        await store.init()
        await store.load((relation(i, "s", i) for i in range(size)), batch_id="base")


async def merge(url: str, size: int, batch: int, semantic: bool) -> dict[str, Any]:
    records = batch_records(size, batch)
    embedder = None
    if semantic:
        from relmerge.config import EmbeddingSettings
        from relmerge.providers import get_embedder

        embedder = get_embedder(EmbeddingSettings())
    config = DeduplicateRelationsConfig(semantic_merge=semantic)
    async with open_graph_store(url) as store:
        started = time.perf_counter()
        output = await StoreMerge(store, config, embedder=embedder).merge(records)
        seconds = time.perf_counter() - started
    result = output.result
    assert result.status == "applied"
    return {
        "seconds": seconds,
        "stored_relations_read": result.stored_relations_read,
        "vectors_computed": result.vectors_computed,
    }


def child(url: str, size: int, batch: int, semantic: bool) -> None:
    figures = asyncio.run(merge(url, size, batch, semantic))
    if semantic:
        from relmerge.providers.use_embed import close_helpers

        close_helpers()
    figures["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(figures))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument(
        "--semantic",
        choices=["both", "on", "off"],
        default="both",
        help="on: the default settings; off: semantic_merge=False; both (default): each.",
    )
    parser.add_argument("--repeat", type=int, default=3, help="Rounds (medians printed).")
    parser.add_argument("--postgresql", action="store_true", help="A PostgreSQL store.")
    parser.add_argument("--child", nargs=4)
    args = parser.parse_args()
    if args.child:
        url, size, batch, semantic = args.child
        child(url, int(size), int(batch), semantic == "on")
        return
    configs = ["on", "off"] if args.semantic == "both" else [args.semantic]
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        copy: Callable[[str, str], str]
        if args.postgresql:
            from tests.support.postgres import postgres_server

            server = stack.enter_context(contextlib.contextmanager(postgres_server)())
            urls = {size: server.new_database() for size in (args.small, args.large)}
            copy = _postgres_copy(server)
        else:
            urls = {
                size: f"sqlite:///{folder / f'g{size}.db'}" for size in (args.small, args.large)
            }
            copy = _sqlite_copy
        measure(urls, args.batch, configs, args.repeat, copy)


def _sqlite_copy(url: str, name: str) -> str:
    source = Path(url.removeprefix("sqlite:///"))
    target = source.with_name(f"{name}.db")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
        if Path(f"{source}{suffix}").exists():
            shutil.copyfile(f"{source}{suffix}", f"{target}{suffix}")
    return f"sqlite:///{target}"


def _postgres_copy(server: Any) -> Callable[[str, str], str]:
    import psycopg

    def copy(url: str, name: str) -> str:
        base = url.split("@/", 1)[1].split("?", 1)[0]
        with psycopg.connect(server.url("postgres"), autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
            connection.execute(f'CREATE DATABASE "{name}" TEMPLATE "{base}"')
        return str(server.url(name))

    return copy


def measure(
    urls: dict[int, str],
    batch: int,
    configs: list[str],
    repeat: int,
    copy: Callable[[str, str], str],
) -> None:
    """Build each store, then ``repeat`` rounds of merges (each configuration into each
    store, a fresh copy and process each); print the medians and the ratios."""
    built = {}
    for size, url in urls.items():
        started = time.perf_counter()
        asyncio.run(build(url, size))
        built[size] = time.perf_counter() - started
        print(f"store {size:>9,}: built in {built[size]:6.1f} s", flush=True)
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for round_ in range(repeat):
        for size, url in urls.items():
            for config in configs:
                fresh = copy(url, f"copy_{size}_{config}")
                out = subprocess.run(
                    [sys.executable, __file__, "--child", fresh, str(size), str(batch), config],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                figures = json.loads(out.splitlines()[-1])
                runs.setdefault((config, size), []).append(figures)
                print(
                    f"  round {round_ + 1}: {CONFIGS[config]:<21} into {size:>9,}: "
                    f"{figures['seconds']:6.2f} s",
                    flush=True,
                )
    small, large = sorted(urls)
    print(f"\nmerge of {batch:,} new relations (medians of {repeat}):")
    medians = {key: statistics.median(f["seconds"] for f in rows) for key, rows in runs.items()}
    for config in configs:
        for size in (small, large):
            rows = runs[(config, size)]
            each = ", ".join(f"{f['seconds']:.2f}" for f in rows)
            print(
                f"{CONFIGS[config]:<21} store {size:>9,} (built in {built[size]:5.1f} s): "
                f"{medians[(config, size)]:6.2f} s ({each}), "
                f"peak {max(f['peak_mib'] for f in rows):5.0f} MiB, "
                f"stored relations read {rows[0]['stored_relations_read']:,}, "
                f"vectors computed {rows[0]['vectors_computed']:,}"
            )
    for config in configs:
        ratio = medians[(config, large)] / medians[(config, small)]
        print(f"ratio large/small, {CONFIGS[config]}: {ratio:.2f}x (target <= 2x; merge <= 60 s)")


if __name__ == "__main__":
    main()
