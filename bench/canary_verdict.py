"""How sure the canary verdict should be: ``canary_confidence`` chosen on two dev domains
and reported on the third (leave one domain out).

    python bench/canary_verdict.py [--dev ../shared/data/dev] [--seeds 10]
                                   [--error-rates 0.1 0.3 0.5] [--embedding use|hash]
                                   [--pack-tokens N]

Each run is the step with the default settings (packed requests, the default canaries)
against the gold-answering judge of ``judge_server.py`` over real HTTP, with its verdicts
wrong at ``--error-rate`` (0.5: at chance), and ``canary_agreement = 0`` so that the
model is never distrusted: the run records every canary answer in the order the tally
takes it. The verdict is then replayed on each run's answers for each candidate
confidence, checked after every answer as the run checks it (``CanaryTally.judges``):
a run is distrusted at the first answer where the verdict holds.

The choice, per held-out domain: on the other two domains, the highest confidence at
which every at-chance run (0.5) and at least 90% of the 0.3 runs are distrusted; among
those, the one with the fewest distrusted 0.1 runs (a good-but-imperfect judge that
should keep its merges). Then its figures on the held-out domain, and what trusting each
judge costs: the trusted runs' mean pair precision and hard negatives merged (a
distrusted run keeps the rules' output, precision 1.000 on the dev set). ``--pack-tokens 0``
asks one question per request. The last line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate import run_step
from judge_server import JudgeServer
from labelled import DEV, DOMAINS, Labelled, load_dev, pair_counts
from relmerge import DeduplicateRelationsConfig
from relmerge.decide.canary import CanaryTally
from relmerge.eval.gold_judge import GoldJudge
from relmerge.providers.embedding import EmbeddingModel, HashEmbedder
from relmerge.providers.openai_compat import OpenAICompatibleModel

CONFIDENCES = (0.5, 0.75, 0.9, 0.95, 0.99)
CHANCE, WEAK, GOOD = 0.5, 0.3, 0.1
WEAK_SHARE = 0.9  # of the 0.3 runs that must be distrusted


@contextmanager
def recorded_answers() -> Iterator[list[bool]]:
    """Every answer a ``CanaryTally`` takes while inside, in order (None: unanswered)."""
    answers: list[bool] = []
    original = CanaryTally.add

    def add(self: CanaryTally, right: bool | None) -> None:
        if right is not None:
            answers.append(right)
        original(self, right)

    CanaryTally.add = add  # type: ignore[method-assign]
    try:
        yield answers
    finally:
        CanaryTally.add = original  # type: ignore[method-assign]


async def run_once(
    data: Labelled,
    embedder: EmbeddingModel,
    error_rate: float,
    seed: int,
    pack_tokens: int | None = None,
) -> dict[str, Any]:
    """One never-distrusting run: its canary answers in order and its pair F1."""
    settings: dict[str, Any] = {"canary_agreement": 0.0}
    if pack_tokens is not None:
        settings["llm_pack_tokens"] = pack_tokens
    judge = GoldJudge(data.gold, error_rate, seed, records=data.records)
    with JudgeServer(judge) as server, recorded_answers() as answers:
        llm = OpenAICompatibleModel(base_url=server.base_url, model="gold-judge")
        mapping, _ = await run_step(data, settings, llm, embedder)
        await llm.aclose()
    counts = pair_counts(data, mapping)
    return {
        "answers": list(answers),
        "pair_f1_trusted": round(counts.f1, 4),
        "pair_precision_trusted": round(counts.precision, 4),
        "hard_negative_merges_trusted": len(counts.hard_negative_merges),
    }


def distrusted_at(answers: list[bool], confidence: float, config: Any) -> int | None:
    """The answer (1-based) at which the verdict first holds, or None."""
    tally = CanaryTally(config.canary_min, config.canary_agreement, confidence=confidence)
    right = 0
    for count, answer in enumerate(answers, 1):
        right += answer
        if tally.judges(right, count):
            return count
    return None


def shares(
    runs: list[dict[str, Any]], domains: list[str], config: Any
) -> dict[float, dict[float, float]]:
    """Per confidence, per error rate: the share of ``domains``' runs distrusted."""
    out: dict[float, dict[float, float]] = {}
    for confidence in CONFIDENCES:
        out[confidence] = {}
        for rate in sorted({run["error_rate"] for run in runs}):
            chosen = [r for r in runs if r["domain"] in domains and r["error_rate"] == rate]
            hit = [distrusted_at(r["answers"], confidence, config) is not None for r in chosen]
            out[confidence][rate] = round(sum(hit) / len(hit), 3) if hit else 0.0
    return out


def choose(table: dict[float, dict[float, float]]) -> float:
    """The confidence that catches every at-chance and nearly every weak run, with the
    fewest good runs stopped (the highest such confidence on a tie)."""
    safe = [
        c
        for c in CONFIDENCES
        if table[c].get(CHANCE, 1.0) >= 1.0 and table[c].get(WEAK, 1.0) >= WEAK_SHARE
    ]
    if not safe:
        return CONFIDENCES[0]
    return min(safe, key=lambda c: (table[c].get(GOOD, 0.0), -c))


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.embedding == "hash":
        embedder: EmbeddingModel = HashEmbedder()
    else:
        from relmerge.providers.use_embed import UseEmbedder

        embedder = UseEmbedder()
    runs = []
    for domain in DOMAINS:
        data = load_dev(domain, args.dev)
        for rate in args.error_rates:
            for seed in range(args.seeds):
                run = await run_once(data, embedder, rate, seed, args.pack_tokens)
                runs.append({"domain": domain, "error_rate": rate, "seed": seed, **run})
                print(
                    f"  {domain} error {rate:g} seed {seed}: "
                    f"{sum(run['answers'])}/{len(run['answers'])} right, "
                    f"F1 {run['pair_f1_trusted']:.3f}",
                    file=sys.stderr,
                )
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--error-rates", type=float, nargs="+", default=[GOOD, WEAK, CHANCE])
    parser.add_argument("--embedding", choices=("use", "hash"), default="use")
    parser.add_argument("--pack-tokens", type=int, help="llm_pack_tokens [the default]")
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error("--seeds must be 1 or more")
    config = DeduplicateRelationsConfig()
    runs = asyncio.run(main_async(args))
    folds = []
    print(f"rule: at least {config.canary_min} answers, threshold {config.canary_agreement:g}")
    for held in DOMAINS:
        tuning = [d for d in DOMAINS if d != held]
        tuned = shares(runs, tuning, config)
        chosen = choose(tuned)
        report = shares(runs, [held], config)
        folds.append({"held_out": held, "chosen": chosen, "tuning": tuned[chosen], "held": report})
        print(f"\nheld out dev:{held}: chosen on {' + '.join(tuning)}: confidence {chosen:g}")
        rates = sorted(report[chosen])
        print(f"{'confidence':>12}" + "".join(f"{'error ' + format(r, 'g'):>12}" for r in rates))
        for confidence in CONFIDENCES:
            mark = " <" if confidence == chosen else ""
            row = "".join(f"{report[confidence][r]:>12.2f}" for r in rates)
            print(f"{confidence:>12g}{row}{mark}")
    print("\n(cells: the share of the held-out domain's runs distrusted)")
    print("\ncanary agreement over all runs (right / answered), per error rate")
    for rate in args.error_rates:
        at = [r["answers"] for r in runs if r["error_rate"] == rate]
        hits, total = sum(sum(a) for a in at), sum(len(a) for a in at)
        print(f"  error {rate:g}: {hits / total:.3f} of {total}")
    print("\nwhat trusting the judge costs (mean over seeds): pair P, hard negatives merged")
    for domain in DOMAINS:
        for rate in args.error_rates:
            those = [r for r in runs if r["domain"] == domain and r["error_rate"] == rate]
            precision = sum(r["pair_precision_trusted"] for r in those) / len(those)
            merged = sum(r["hard_negative_merges_trusted"] for r in those) / len(those)
            print(f"  dev:{domain} error {rate:g}: P {precision:.3f}, {merged:.1f} hard negatives")
    answered = {
        f"{r['domain']}:{r['error_rate']:g}:{r['seed']}": [sum(r["answers"]), len(r["answers"])]
        for r in runs
    }
    f1 = {f"{r['domain']}:{r['error_rate']:g}:{r['seed']}": r["pair_f1_trusted"] for r in runs}
    figures = {"seeds": args.seeds, "pack_tokens": args.pack_tokens, "folds": folds}
    print(json.dumps({**figures, "right_of_answered": answered, "pair_f1_trusted": f1}))


if __name__ == "__main__":
    main()
