"""The canary verdict measured: how often the sequential test stops a good judge and
trusts a bad one, on every labelled set, packed and one question a request.

    python bench/canary_verdict.py [--runs 20] [--simulated 200]
                                   [--error-rates 0 0.05 0.1 0.2 0.3 0.5]
                                   [--pack-tokens 0 8000] [--only dev:geo ...]
                                   [--canary-tokens SHARE] [--record-only] [--shipped-rule]
                                   [--keep FILE] [--json FILE]

Sets: the three dev domains and the five labelled real graphs (``labelled.all_sets``).
The judge is the gold-answering server of ``judge_server.py`` over real HTTP, wrong at
each error rate (each record of a cluster answer in a wrong group, each pair of groups
wrongly merged, with that probability; 0.5: at chance). Per set, packing and error rate
(a cell):

1. ``--runs`` recording runs (judge seeds 0..N-1) with the verdict's error rates set so
   small that no boundary is ever crossed: the run carries every canary it would carry
   while the test is undecided, and records each answer with its kind (free, keep,
   merge, near: ``decide.canary_mix``) in the order the test hears it; its pair precision
   and F1 are those of a trusted judge. One run with ``--llm none`` gives the rules'.
2. ``--runs`` full runs with the shipped verdict (the same seeds): the share the test
   stopped, and the pair precision and F1 the user gets.
3. ``--simulated`` seeded runs of the test alone: each takes a recording run's canary
   kinds, in its count and order, and draws each answer right with the cell's agreement
   for that kind; the test sees only that sequence. A stopped run scores as the rules'
   run, a trusted or undecided one as its recording run.

The rule (``canary_good_agreement``, ``canary_bad_agreement``) is chosen on held-out runs,
never on the sets it is reported on: each candidate pair's test is replayed, with no limit
on canaries (a recording run's kinds repeated until a boundary is crossed), on the tuning
sets' runs of the 10%-wrong and the at-chance judges; the pair that stops at most 1% of
the first and trusts at most 1% of the second on every tuning set, with the fewest
canaries to a verdict, is chosen. Folds: each dev domain chosen on the other two; the
real graphs chosen on the three dev domains (the shipped defaults). The last line is one
JSON object with every figure; ``--json`` writes it to a file as well.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate import run_step
from judge_server import JudgeServer
from labelled import DEV, DOMAINS, Labelled, all_sets, pair_counts
from relmerge import DeduplicateRelationsConfig
from relmerge.decide import canary_mix
from relmerge.decide.sequential import TestRule
from relmerge.eval.gold_judge import GoldJudge
from relmerge.providers.embedding import Vectors
from relmerge.providers.openai_compat import OpenAICompatibleModel
from relmerge.run import canaries as run_canaries

GOOD, CHANCE = 0.1, 0.5  # the judges the rule must tell apart
TARGET = 0.01  # at most this share of either judge misjudged
NEVER = 1e-300  # error rates no boundary is crossed at: the test records, never decides
GOODS = [round(0.80 + 0.01 * i, 2) for i in range(17)]  # 0.80 … 0.96
BADS = [round(0.50 + 0.01 * i, 2) for i in range(41)]  # 0.50 … 0.90
UNLIMITED = 3000  # answers a replay may take before it counts as undecided


class MemoEmbedder:
    """The default embedder, each text embedded once for every run of the bench."""

    def __init__(self) -> None:
        from relmerge.providers.use_embed import UseEmbedder

        self.inner = UseEmbedder()
        self.name = self.inner.name
        self.vectors: dict[str, np.ndarray[Any, Any]] = {}

    async def embed(self, texts: Sequence[str]) -> Vectors:
        missing = list(dict.fromkeys(t for t in texts if t not in self.vectors))
        if missing:
            for text, row in zip(missing, await self.inner.embed(missing), strict=True):
                self.vectors[text] = row
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        return np.stack([self.vectors[t] for t in texts]).astype(np.float32)


@contextmanager
def heard() -> Iterator[list[tuple[str, bool | None]]]:
    """Every canary answer with its kind, in the order the run's test hears it."""
    got: list[tuple[str, bool | None]] = []
    answers = canary_mix.Mixed.answers
    alone = getattr(run_canaries, "ask_canary")  # noqa: B009 - the run's own binding

    def read(self: canary_mix.Mixed, outcome: Any) -> list[bool | None]:
        out = answers(self, outcome)
        got.extend(zip(self.kinds, out, strict=True))
        return out

    async def asked(*args: Any) -> bool | None:
        right: bool | None = await alone(*args)
        got.append(("alone", right))
        return right

    canary_mix.Mixed.answers = read  # type: ignore[method-assign]
    setattr(run_canaries, "ask_canary", asked)  # noqa: B010
    try:
        yield got
    finally:
        canary_mix.Mixed.answers = answers  # type: ignore[method-assign]
        setattr(run_canaries, "ask_canary", alone)  # noqa: B010


@dataclass
class Cell:
    """One set, packing and error rate: its recording runs and its full runs."""

    name: str
    pack: int
    rate: float
    recorded: list[list[tuple[str, bool]]] = field(default_factory=list)
    trusted: list[tuple[float, float]] = field(default_factory=list)  # (P, F1) per seed
    full: list[dict[str, Any]] = field(default_factory=list)

    def agreement(self) -> dict[str, float]:
        """Per kind, the share of the recording runs' answers that were right."""
        by: dict[str, list[bool]] = {}
        for run in self.recorded:
            for kind, right in run:
                by.setdefault(kind, []).append(right)
        return {kind: sum(v) / len(v) for kind, v in by.items()}

    @property
    def key(self) -> str:
        return f"{self.name}|{self.pack}|{self.rate:g}"


async def one_run(
    data: Labelled,
    embedder: MemoEmbedder,
    server: JudgeServer,
    rate: float,
    seed: int,
    settings: dict[str, Any],
) -> tuple[dict[str, Any], list[tuple[str, bool]]]:
    """One run against ``server`` answering as the judge of ``seed`` at ``rate``: its
    figures, and its canary answers (with their kinds) in the order the test heard them."""
    server.judge = GoldJudge(data.gold, rate, seed, records=data.records)
    with heard() as answers:
        llm = OpenAICompatibleModel(base_url=server.base_url, model="gold-judge")
        mapping, result = await run_step(data, settings, llm, embedder)
        await llm.aclose()
    counts = pair_counts(data, mapping)
    figures = {
        "precision": counts.precision,
        "f1": counts.f1,
        "hard_negatives": len(counts.hard_negative_merges),
        "verdict": result["canaries"]["verdict"],
        "answered": result["canaries"]["answered"],
        "requests": result["llm_requests"],
    }
    return figures, [(kind, right) for kind, right in answers if right is not None]


_DRAWN: dict[tuple[str, int, int | None, str], tuple[Any, Any]] = {}


def _draws(cell: Cell, n: int, length: int | None, salt: str) -> tuple[Any, Any]:
    """``n`` answer sequences for the cell, each on a recording run's kinds (in turn) with
    each answer right with its kind's agreement: (right, valid) boolean matrices; with
    ``length``, each run's kinds repeated to that length (no limit on canaries). Drawn
    once per cell: every candidate rule is judged on the same answers."""
    key = (cell.key, n, length, salt)
    if key in _DRAWN:
        return _DRAWN[key]
    p = cell.agreement()
    runs = [[p.get(kind, 0.5) for kind, _ in run] for run in cell.recorded]
    width = length or max((len(r) for r in runs), default=0)
    chance = np.zeros((n, width))
    valid = np.zeros((n, width), dtype=bool)
    for i in range(n):
        run = runs[i % len(runs)]
        if not run:
            continue
        count = width if length else len(run)
        chance[i, :count] = np.resize(np.array(run), count)
        valid[i, :count] = True
    rng = np.random.default_rng(zlib.crc32(f"{cell.key}|{salt}".encode()))
    _DRAWN[key] = (rng.random((n, width)) < chance, valid)
    return _DRAWN[key]


def verdicts(right: Any, valid: Any, rule: TestRule) -> tuple[list[str], list[int]]:
    """The test on each row of answers: its verdict and the answers it took."""
    steps = np.where(right, rule.step(True), rule.step(False)) * valid
    evidence = np.cumsum(steps, axis=1)
    crossed = ((evidence >= rule.trust_at) | (evidence <= rule.stop_at)) & valid
    any_crossed = crossed.any(axis=1)
    first = crossed.argmax(axis=1)
    at = evidence[np.arange(len(first)), first]
    out = [
        ("trusted" if value >= rule.trust_at else "distrusted") if hit else "not_judged"
        for hit, value in zip(any_crossed, at, strict=True)
    ]
    taken = np.where(any_crossed, first + 1, valid.sum(axis=1))
    return out, [int(t) for t in taken]


def unlimited_errors(
    cells: Sequence[Cell], rule: TestRule, draws: int = 200
) -> tuple[float, float, float]:
    """On ``cells`` (each set's good and at-chance judges), with no limit on canaries: the
    worst share of good runs stopped, the worst share of at-chance runs trusted, and the
    mean answers to a verdict."""
    worst_stop = worst_trust = 0.0
    answers: list[int] = []
    for cell in cells:
        if not any(cell.recorded):
            continue
        right, valid = _draws(cell, draws, UNLIMITED, "unlimited")
        outcome, taken = verdicts(right, valid, rule)
        answers += taken
        if cell.rate == GOOD:
            worst_stop = max(worst_stop, outcome.count("distrusted") / draws)
        else:
            worst_trust = max(worst_trust, (draws - outcome.count("distrusted")) / draws)
    return worst_stop, worst_trust, statistics.mean(answers) if answers else 0.0


def choose(cells: Sequence[Cell], false_rate: float = TARGET) -> TestRule | None:
    """The rule whose test, on ``cells`` (tuning sets only), misjudges at most
    ``false_rate`` of each judge with no limit on canaries, with the fewest answers."""
    tuning = [c for c in cells if c.rate in (GOOD, CHANCE)]
    best: tuple[float, TestRule] | None = None
    for good in GOODS:
        for bad in BADS:
            if bad >= good - 0.04:
                continue
            rule = TestRule(good, bad, false_rate, false_rate)
            stop, trust, mean = unlimited_errors(tuning, rule)
            if stop <= false_rate and trust <= false_rate and (best is None or mean < best[0]):
                best = (mean, rule)
    return best[1] if best is not None else None


def simulate(cell: Cell, rule: TestRule, rules_only: tuple[float, float], n: int) -> dict[str, Any]:
    """``n`` runs of the test on the cell's real canary counts and orders."""
    if not any(cell.recorded):
        outcome = ["not_judged"] * n
    else:
        right, valid = _draws(cell, n, None, "simulated")
        outcome, _ = verdicts(right, valid, rule)
    precision, f1 = [], []
    for i, verdict in enumerate(outcome):
        score = rules_only if verdict == "distrusted" else cell.trusted[i % len(cell.trusted)]
        precision.append(score[0])
        f1.append(score[1])
    return {
        "simulated": n,
        "distrusted": outcome.count("distrusted") / n,
        "trusted": outcome.count("trusted") / n,
        "not_judged": outcome.count("not_judged") / n,
        "precision": statistics.mean(precision),
        "f1": statistics.mean(f1),
    }


async def measure(
    data: Labelled,
    embedder: MemoEmbedder,
    cell: Cell,
    runs: int,
    full: bool,
    extra: dict[str, Any],
) -> None:
    """The cell's recording runs (unless it holds them already) and, with ``full``, its
    runs with the shipped verdict."""
    shipped: dict[str, Any] = {"llm_pack_tokens": cell.pack, **extra}
    never = {**shipped, "canary_false_stop": NEVER, "canary_false_trust": NEVER}
    with JudgeServer(GoldJudge(data.gold, cell.rate, records=data.records)) as server:
        for seed in range(len(cell.recorded), runs):
            run, answers = await one_run(data, embedder, server, cell.rate, seed, never)
            cell.recorded.append(answers)
            cell.trusted.append((run["precision"], run["f1"]))
        for seed in range(len(cell.full), runs if full else 0):
            figures, _ = await one_run(data, embedder, server, cell.rate, seed, shipped)
            cell.full.append(figures)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    embedder = MemoEmbedder()
    sets = [d for d in all_sets(args.dev) if not args.only or d.name in args.only]
    kept = json.loads(args.keep.read_text()) if args.keep and args.keep.exists() else {}
    rules_only: dict[str, tuple[float, float]] = {
        name: (figures[0], figures[1]) for name, figures in kept.get("rules_only", {}).items()
    }
    cells: list[Cell] = []
    for data in sets:
        if data.name not in rules_only:
            mapping, _ = await run_step(data, {}, None, embedder)
            counts = pair_counts(data, mapping)
            rules_only[data.name] = (counts.precision, counts.f1)
        for pack in args.pack_tokens:
            for rate in args.error_rates:
                cell = Cell(data.name, pack, rate)
                old = kept.get("cells", {}).get(cell.key, {})
                cell.recorded = [[(k, bool(r)) for k, r in run] for run in old.get("recorded", [])]
                cell.trusted = [(p, f) for p, f in old.get("trusted", [])]
                cell.full = list(old.get("full", []))
                extra = {} if args.canary_tokens is None else {"canary_tokens": args.canary_tokens}
                await measure(data, embedder, cell, args.runs, not args.record_only, extra)
                cells.append(cell)
                stopped = [r["verdict"] == "distrusted" for r in cell.full]
                print(
                    f"  {data.name} pack {pack} error {rate:g}: "
                    f"{statistics.mean(len(r) for r in cell.recorded):.1f} canaries a run, "
                    f"agreement {cell.agreement()}, full runs distrusted "
                    f"{sum(stopped)} of {len(stopped)}",
                    file=sys.stderr,
                )
                if args.keep:
                    store = {
                        "rules_only": rules_only,
                        "cells": {
                            **kept.get("cells", {}),
                            **{
                                c.key: {
                                    "recorded": c.recorded,
                                    "trusted": c.trusted,
                                    "full": c.full,
                                }
                                for c in cells
                            },
                        },
                    }
                    args.keep.write_text(json.dumps(store))
    return {"cells": cells, "rules_only": rules_only}


def report(
    cells: list[Cell], rules_only: dict[str, tuple[float, float]], args: argparse.Namespace
) -> dict[str, Any]:
    shipped = TestRule.of(DeduplicateRelationsConfig())
    folds: dict[str, Any] = {}
    dev = [f"dev:{d}" for d in DOMAINS]
    chosen_on: dict[tuple[str, ...], TestRule | None] = {}
    for held in sorted({c.name for c in cells}):
        if args.shipped_rule:
            folds[held] = {"good": shipped.good, "bad": shipped.bad}
            continue
        tuning = tuple(d for d in dev if d != held)
        if tuning not in chosen_on:
            chosen_on[tuning] = choose([c for c in cells if c.name in tuning])
        rule = chosen_on[tuning]
        folds[held] = None if rule is None else {"good": rule.good, "bad": rule.bad}
    chosen = None
    if not args.shipped_rule:
        chosen = chosen_on.get(tuple(dev)) or choose([c for c in cells if c.name in dev])
    print("\nthe rule chosen on held-out runs (each set's rule chosen without it):")
    for held, rule in folds.items():
        print(f"  {held}: {rule}")
    print(f"  on all three dev domains (the shipped default's procedure): {chosen}")
    print(f"  shipped: good {shipped.good:g}, bad {shipped.bad:g}")
    rows = []
    print(
        f"\n{'set':<36}{'pack':>6}{'error':>7}{'canaries':>10}{'agree':>7}"
        f"{'full: stopped':>15}{'P':>7}{'F1':>7}"
        f"{'sim: stopped':>14}{'trusted':>9}{'undecided':>11}{'P':>7}{'F1':>7}"
    )
    for cell in cells:
        fold = folds.get(cell.name)
        rule = TestRule(fold["good"], fold["bad"], TARGET, TARGET) if fold else shipped
        sim = simulate(cell, rule, rules_only[cell.name], args.simulated)
        full = cell.full or [{"verdict": "", "precision": 0, "f1": 0, "hard_negatives": 0}]
        full_stopped = sum(r["verdict"] == "distrusted" for r in full) / len(full)
        answered = [a for run in cell.recorded for _, a in run]
        row = {
            "set": cell.name,
            "pack_tokens": cell.pack,
            "error_rate": cell.rate,
            "rule": {"good": rule.good, "bad": rule.bad},
            "canaries_per_run": statistics.mean(len(r) for r in cell.recorded),
            "agreement": sum(answered) / len(answered) if answered else None,
            "agreement_by_kind": cell.agreement(),
            "full_runs": len(cell.full),
            "full_distrusted": full_stopped,
            "full_not_judged": sum(r["verdict"] == "not_judged" for r in full) / len(full),
            "full_precision": statistics.mean(r["precision"] for r in full),
            "full_f1": statistics.mean(r["f1"] for r in full),
            "full_hard_negatives": statistics.mean(r["hard_negatives"] for r in full),
            "trusted_precision": statistics.mean(p for p, _ in cell.trusted),
            "rules_only_precision": rules_only[cell.name][0],
            **{f"sim_{k}": v for k, v in sim.items()},
        }
        rows.append(row)
        agreement = f"{row['agreement']:.2f}" if row["agreement"] is not None else "-"
        print(
            f"{cell.name:<36}{cell.pack:>6}{cell.rate:>7g}{row['canaries_per_run']:>10.1f}"
            f"{agreement:>7}{full_stopped:>15.2f}{row['full_precision']:>7.3f}"
            f"{row['full_f1']:>7.3f}{sim['distrusted']:>14.3f}{sim['trusted']:>9.3f}"
            f"{sim['not_judged']:>11.3f}{sim['precision']:>7.3f}{sim['f1']:>7.3f}"
        )
    return {
        "runs": args.runs,
        "simulated": args.simulated,
        "folds": folds,
        "chosen_on_dev": None if chosen is None else {"good": chosen.good, "bad": chosen.bad},
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--simulated", type=int, default=200)
    parser.add_argument(
        "--error-rates", type=float, nargs="+", default=[0.0, 0.05, 0.1, 0.2, 0.3, 0.5]
    )
    parser.add_argument("--pack-tokens", type=int, nargs="+", default=[0, 8000])
    parser.add_argument("--only", nargs="+", help="set names (dev:geo, real:…)")
    parser.add_argument(
        "--canary-tokens", type=float, help="canary_tokens for every run [the default]"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--keep",
        type=Path,
        help="a file of the runs made so far: read (runs already there are not made again) "
        "and written after each cell",
    )
    parser.add_argument(
        "--shipped-rule",
        action="store_true",
        help="simulate every set with the shipped rule (no choice: a comparison run)",
    )
    parser.add_argument(
        "--record-only",
        action="store_true",
        help="only the recording runs: the rule's choice and the simulated runs",
    )
    args = parser.parse_args()
    if args.runs < 1 or args.simulated < 1:
        parser.error("--runs and --simulated must be 1 or more")
    measured = asyncio.run(main_async(args))
    figures = report(measured["cells"], measured["rules_only"], args)
    text = json.dumps(figures)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
