"""Soak the pipeline under injected LLM faults: many seeds, scaled fault rates.

    PYTHONPATH=. .venv/bin/python bench/soak_faults.py [--rate 1 2] [--repeat 10] [--seed 0]
        [--subset N] [--max-attempts 3] [--max-retries 8] [--exact-only]

The long variant of ``tests/test_fault_injection.py``: the dev set runs through a loopback
OpenAI-compatible server that answers from the gold clusters, once fault-free and then
``--repeat`` times per rate multiplier with faults injected by
``tests.support.faults.FaultyHandler`` (base rates: 30% garbage, 10% HTTP 429, 5% HTTP 500,
2% dropped connections, up to 50 ms latency; ``--rate 2`` doubles the four rates). One row
per run: faults injected by kind, requests sent, failed groups, pair F1 fault-free vs
faulty, records lost (must be 0), whether the circuit breaker opened (it must not: the
endpoint answers, if badly). Prints figures only, then a final JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# The repository root: tests.support holds the fault layer and the loopback server.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.faults import (
    DEV,
    FaultyHandler,
    load_dev,
    lost_records,
    run_through_server,
)
from tests.support.gold_judge import gold_task_handler

from relmerge.eval.gold_judge import GoldJudge
from relmerge.eval.metrics import evaluate

BASE_RATES = {"garbage": 0.3, "rate_limited": 0.1, "server_error": 0.05, "dropped": 0.02}
F1_TOLERANCE = 0.05


async def soak(args: argparse.Namespace) -> list[dict[str, Any]]:
    dev = load_dev(args.dev).subset(args.subset)
    semantic = not args.exact_only
    options = {
        "semantic": semantic,
        "max_retries": args.max_retries,
        "max_attempts": args.max_attempts,
    }
    reference = await run_through_server(
        dev, gold_task_handler(GoldJudge(dev.gold, records=dev.records)), **options
    )
    f1_reference = evaluate(reference.output.relation_id_mapping, dev.gold).pair_f1
    rows: list[dict[str, Any]] = []
    for multiplier in args.rate:
        rates = {kind: rate * multiplier for kind, rate in BASE_RATES.items()}
        for offset in range(args.repeat):
            seed = args.seed + offset
            faults = FaultyHandler(
                gold_task_handler(GoldJudge(dev.gold, records=dev.records)),
                **rates,
                max_latency=args.latency,
                seed=seed,
            )
            start = time.perf_counter()
            run = await run_through_server(dev, faults, **options)
            seconds = time.perf_counter() - start
            result = run.output.result
            f1 = evaluate(run.output.relation_id_mapping, dev.gold).pair_f1
            rows.append(
                {
                    "rate": multiplier,
                    "seed": seed,
                    **{kind: faults.counts[kind] for kind in BASE_RATES},
                    "answered_ok": faults.counts["ok"],
                    "requests": result["llm_requests"],
                    "reference_requests": reference.output.result["llm_requests"],
                    "failed_requests": result["llm_failed_requests"],
                    "failed_groups": result["failed_group_count"],
                    "breaker_open": result["llm_circuit_breaker"]["open"],
                    "expected_failed_groups": faults.unanswered_questions(
                        args.max_retries, args.max_attempts
                    ),
                    "f1_fault_free": round(f1_reference, 4),
                    "f1_faulty": round(f1, 4),
                    "delta_f1": round(f1 - f1_reference, 4),
                    "lost": len(
                        lost_records(run.output, run.store, dev.records, dev.entity_mapping)
                    ),
                    "seconds": round(seconds, 2),
                }
            )
            print_row(rows[-1], header=len(rows) == 1)
    return rows


COLUMNS = (
    ("rate", "rate", "{:>5.1f}"),
    ("seed", "seed", "{:>5}"),
    ("garbage", "garb", "{:>6}"),
    ("rate_limited", "429", "{:>5}"),
    ("server_error", "500", "{:>5}"),
    ("dropped", "drop", "{:>5}"),
    ("requests", "req", "{:>5}"),
    ("failed_requests", "req✗", "{:>5}"),
    ("failed_groups", "grp✗", "{:>5}"),
    ("f1_fault_free", "F1 ok", "{:>7.4f}"),
    ("f1_faulty", "F1 flt", "{:>7.4f}"),
    ("delta_f1", "ΔF1", "{:>8.4f}"),
    ("lost", "lost", "{:>5}"),
    ("seconds", "s", "{:>6.2f}"),
)


def print_row(row: dict[str, Any], header: bool) -> None:
    if header:
        print(" ".join(f"{title:>{len(fmt.format(row[key]))}}" for key, title, fmt in COLUMNS))
    print(" ".join(fmt.format(row[key]) for key, _, fmt in COLUMNS), flush=True)


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for multiplier in sorted({row["rate"] for row in rows}):
        group = [row for row in rows if row["rate"] == multiplier]
        deltas = [row["delta_f1"] for row in group]
        summary[str(multiplier)] = {
            "runs": len(group),
            "mean_delta_f1": round(statistics.fmean(deltas), 4),
            "worst_delta_f1": min(deltas),
            "runs_within_tolerance": sum(1 for d in deltas if abs(d) <= F1_TOLERANCE),
            "mean_failed_groups": round(statistics.fmean(r["failed_groups"] for r in group), 2),
            "failed_groups_as_replayed": all(
                r["failed_groups"] == r["expected_failed_groups"] for r in group
            ),
            "records_lost": sum(row["lost"] for row in group),
            "circuit_breaker_opened": sum(1 for row in group if row["breaker_open"]),
        }
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument(
        "--rate",
        type=float,
        nargs="+",
        default=[1.0],
        help="multipliers of the base fault rates (their sum must stay <= 1)",
    )
    parser.add_argument("--repeat", type=int, default=10, help="seeds per multiplier")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--subset", type=int, default=None, help="first N dev records only")
    parser.add_argument("--max-attempts", type=int, default=3)
    parser.add_argument("--max-retries", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.05, help="max seconds per answer")
    parser.add_argument("--exact-only", action="store_true", help="no semantic stage")
    args = parser.parse_args()
    if max(args.rate) * sum(BASE_RATES.values()) > 1:
        parser.error(f"--rate above {1 / sum(BASE_RATES.values()):.2f} makes rates sum past 1")
    rows = asyncio.run(soak(args))
    summary = summarise(rows)
    print()
    for multiplier, figures in summary.items():
        print(
            f"rate x{multiplier}: {figures['runs']} runs, ΔF1 mean {figures['mean_delta_f1']:+.4f}"
            f" worst {figures['worst_delta_f1']:+.4f}, within ±{F1_TOLERANCE}: "
            f"{figures['runs_within_tolerance']}/{figures['runs']}, failed groups mean "
            f"{figures['mean_failed_groups']}, records lost {figures['records_lost']}, "
            f"circuit breaker opened {figures['circuit_breaker_opened']}/{figures['runs']}"
        )
    print(json.dumps({"summary": summary, "runs": rows}))


if __name__ == "__main__":
    main()
