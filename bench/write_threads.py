"""How many threads should write a run's relation files? Wall time and CPU, measured.

Writes N relation-sized files (about 700 bytes, as a GraphRAG-shaped run's, named by a
hash as merged and input ids are) into a new directory as a run writes them
(``io.write.write_files``: ``LocalStore.put_many`` on slices of 512), with 1, 2 and 8
write threads in turn,
``--repeat`` times; prints the wall seconds and the CPU seconds of this process (user +
kernel) of each. Creating files in one directory is serialised by the kernel's lock on
it: on a quiet disk more threads cannot make it faster, and the CPU they spend waiting on
the lock is taken from the run's other work on a machine of few cores. Where a creation
waits on the disk (after mass deletions on a disk mounted with ``discard``, say) threads
overlap the waits; ``LocalStore`` keeps eight for that (see its ``put_many``). Nothing is
deleted between the rounds (a deletion makes the next creations slower on some disks for
a while); the folder is removed at the end.

    .venv/bin/python bench/write_threads.py --files 20000 --repeat 3 [--dir /path/on/the/disk]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from relmerge.io.write import write_files
from relmerge.stores import local
from relmerge.stores.local import LocalStore

THREADS = (1, 2, 8)


def _write(store: LocalStore, items: list[tuple[str, bytes]], threads: int) -> None:
    """``write_files`` itself, with ``threads`` write threads instead of the store's."""
    default = local._WRITE_THREADS
    local._WRITE_THREADS = threads
    try:
        asyncio.run(write_files(store, items))
    finally:
        local._WRITE_THREADS = default


def _hashed(round_: int, i: int) -> str:
    return hashlib.blake2b(f"{round_}-{i}".encode(), digest_size=8).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="where to write (default: a temp dir)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="relmerge-write-threads-", dir=args.dir))
    data = b'{"relation_id": "relation_0", "description": "' + b"x" * 640 + b'"}'
    figures: dict[int, list[tuple[float, float]]] = {threads: [] for threads in THREADS}
    try:
        for round_ in range(args.repeat):
            for threads in THREADS:
                store = LocalStore(root / f"{threads}-{round_}")
                items = [
                    (f"deduplicated_relations/relation_{_hashed(round_, i)}.json", data)
                    for i in range(args.files)
                ]
                cpu, started = os.times(), time.perf_counter()
                _write(store, items, threads)
                wall, after = time.perf_counter() - started, os.times()
                used = after.user - cpu.user + after.system - cpu.system
                figures[threads].append((wall, used))
                print(
                    f"round {round_ + 1}, {threads} thread(s): {wall:.2f} s wall, {used:.2f} s CPU"
                )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n{args.files:,} files per write, median of {args.repeat} rounds:")
    for threads, rows in figures.items():
        wall = statistics.median(row[0] for row in rows)
        used = statistics.median(row[1] for row in rows)
        print(
            f"{threads} thread(s): {wall:.2f} s wall, {used:.2f} s CPU "
            f"({1e6 * used / args.files:.0f} µs CPU per file)"
        )


if __name__ == "__main__":
    main()
