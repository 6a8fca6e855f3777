"""Kill ``relmerge run`` with SIGKILL at random moments, resume, and compare.

Each trial starts the CLI on the dev set against the gold judge on a loopback server,
kills it at a uniformly random moment of an uninterrupted run's duration, re-runs it into
the same OUT, and checks that the outputs (relation files, mapping, key list) equal the
uninterrupted run's, that no input id or chunk id is lost, and how many answered requests
were asked again (only those in flight at the kill may be).

    PYTHONPATH=. .venv/bin/python bench/soak_kills.py --trials 20 --seed 1
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from tests.support.dev_cli import DEV, dev_run_args, run_outputs
from tests.support.gold_judge import dev_gold_judge, gold_task_handler
from tests.support.llm_server import LLMServer, Reply


def run_args(out: Path, base_url: str, concurrency: int) -> list[str]:
    return [sys.executable, "-m", "relmerge", *dev_run_args(out, base_url, concurrency)]


def lost(out: Path) -> int:
    """Input ids missing from the mapping plus input chunk ids missing from their output."""
    mapping = orjson.loads((out / "relation_id_mapping.json").read_bytes())
    missing = 0
    for line in (DEV / "relations.jsonl").read_bytes().splitlines():
        item = orjson.loads(line)
        target = mapping.get(item["relation_id"])
        if target is None:
            missing += 1
            continue
        relation = orjson.loads((out / "deduplicated_relations" / f"{target}.json").read_bytes())
        missing += len(set(item["source_chunk_ids"]) - set(relation["source_chunk_ids"]))
    return missing


def key(body: Any) -> bytes:
    return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.03, help="seconds per answer")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    handle = gold_task_handler(dev_gold_judge(DEV))

    def slow(body: dict[str, Any]) -> Reply:
        return dataclasses.replace(handle(body), delay=args.latency)

    with LLMServer(handler=slow) as server, tempfile.TemporaryDirectory() as tmp:
        reference = Path(tmp) / "reference"
        started = time.monotonic()
        subprocess.run(
            [*run_args(reference, server.base_url, args.concurrency), "--no-cache"], check=True
        )
        duration = time.monotonic() - started
        expected = run_outputs(reference)
        reference_requests = len(server.group_requests)
        print(f"uninterrupted run: {duration:.1f} s, {reference_requests} LLM requests")
        rows = []
        for trial in range(args.trials):
            out = Path(tmp) / f"trial{trial}"
            at = rng.uniform(0, duration)
            start = len(server.group_requests)
            process = subprocess.Popen(run_args(out, server.base_url, args.concurrency))
            time.sleep(at)
            killed = process.poll() is None
            process.send_signal(signal.SIGKILL)
            process.wait()
            asked = {key(body) for body in server.group_requests[start:]}
            complete_after_kill = (out / "deduplicate_relations_result.json").exists()
            resumed_from = len(server.group_requests)
            subprocess.run(run_args(out, server.base_url, args.concurrency), check=True)
            resumed = server.group_requests[resumed_from:]
            rows.append(
                {
                    "kill_at_s": round(at, 2),
                    "killed": killed,
                    "asked_before_kill": len(asked),
                    "complete_after_kill": complete_after_kill,
                    "resumed_requests": len(resumed),
                    "repeated": sum(1 for body in resumed if key(body) in asked),
                    "same_outputs": run_outputs(out) == expected,
                    "lost": lost(out),
                }
            )
            print(rows[-1], flush=True)
    kills = [row for row in rows if row["killed"]]
    print(
        f"\n{len(kills)} runs killed mid-run (of {len(rows)} trials); "
        f"outputs equal to the uninterrupted run: {sum(r['same_outputs'] for r in rows)}"
        f"/{len(rows)}; records or chunk ids lost: {sum(int(r['lost']) for r in rows)}; "
        f"half-written runs that looked complete: "
        f"{sum(1 for r in kills if r['complete_after_kill'])}; answered requests asked again: "
        f"{sum(int(r['repeated']) for r in rows)} (in flight at the kill; "
        f"--concurrency {args.concurrency})"
    )


if __name__ == "__main__":
    main()
