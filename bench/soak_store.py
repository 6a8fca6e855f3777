"""Soak the store merge's crash and concurrency scenarios (SQLite): N rounds of two
merges at once into one file, the first killed with SIGKILL at a rotating point and run
again; prints runs, lost input ids and duplicated facts (targets: 0 and 0).

    PYTHONPATH=src:. python bench/soak_store.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.graphstore.test_processes import kill_when_paused
from tests.storemerge.batches import FOUNDED
from tests.storemerge.child import big_batch

from relmerge.graphstore import open_graph_store

ROOT = Path(__file__).resolve().parents[1]


def child(*args: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "tests.storemerge.child", *args]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


async def counts(url: str) -> tuple[int, int]:
    async with open_graph_store(url) as store:
        relations = [r async for r in store.dump()]
        ids = [r["relation_id"] for name in ("a", "b") for r in big_batch(name)]
        folded = await store.folded(ids)
    lost = len(set(ids) - set(folded))
    duplicates = sum(1 for r in relations if r.description == FOUNDED) - 10
    return lost, duplicates


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    lost = duplicates = 0
    with tempfile.TemporaryDirectory() as folder:
        for n in range(rounds):
            url = f"sqlite:///{Path(folder) / f'soak{n}.db'}"
            kill_when_paused(child(url, "a", "--pause-at", str((0, 1, 2, -1)[n % 4])))
            both = [child(url, "a"), child(url, "b")]
            for process in both:
                _, err = process.communicate(timeout=600)
                assert process.returncode == 0, err.decode()[-2000:]
            round_lost, round_duplicates = asyncio.run(counts(url))
            lost += round_lost
            duplicates += round_duplicates
    print(f"runs: {rounds * 3}  rounds: {rounds}  lost: {lost}  duplicates: {duplicates}")


if __name__ == "__main__":
    main()
