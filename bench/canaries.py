"""Canary questions on the dev set, through the CLI, the real HTTP client and a scripted
judge server answering from gold (``judge_server.py``; ``--error-rate 0.5``: at chance).

    python bench/canaries.py [--dev ../shared/data/dev] [--rates 0.05 0.15] [--pack-tokens N]

Rows: rules only (``--llm none``); the at-chance judge without canaries; the at-chance
judge with canaries at each of ``--rates``; the gold judge without and with canaries
(the default share). Prints pair P/R/F1, hard-negative merges, requests, the canary
tally and the exit status per row, then the targets: with canaries, at-chance precision
≥ rules-only − 0.01 and no more hard-negative merges than rules-only; gold: ≤ 5% more
requests and no output change. The last line is one JSON object with every figure.
``--pack-tokens`` is passed on as ``--llm-pack-tokens`` (unset: the run's default).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_server import JudgeServer
from relmerge.eval.gold import labelled_relations, load_gold
from relmerge.eval.gold_judge import GoldJudge
from semantic_dev import RELMERGE, hard_negative_merges

REPO = Path(__file__).resolve().parents[1]


def run(dev: Path, out: Path, extra: list[str]) -> dict[str, Any]:
    """One ``relmerge run`` (exit 3 is an answer here, not a failure) and its figures."""
    command = [
        *RELMERGE,
        "run",
        str(dev / "relations.jsonl"),
        "--entity-mapping",
        str(dev / "entity_id_mapping.json"),
        "--entities",
        str(dev / "entities.jsonl"),
        "--output",
        str(out),
        "--quiet",
        "--no-cache",
        *extra,
    ]
    status = subprocess.run(command, capture_output=True, text=True).returncode
    if status not in (0, 3):
        raise SystemExit(f"relmerge run exited {status}: {' '.join(command)}")
    report = subprocess.run(
        [*RELMERGE, "eval", str(out), "--gold", str(dev / "gold.jsonl"), "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    figures: dict[str, Any] = json.loads(report.stdout)
    result = json.loads((out / "deduplicate_relations_result.json").read_text())
    mapping = json.loads((out / "relation_id_mapping.json").read_text())
    clarifications = out / "clarifications.jsonl"
    return {
        "exit": status,
        "pair_precision": figures["pair_precision"],
        "pair_recall": figures["pair_recall"],
        "pair_f1": figures["pair_f1"],
        "hard_negative_merges": hard_negative_merges(dev, mapping, load_gold(dev / "gold.jsonl")),
        "llm_requests": result["llm_requests"],
        "canaries": result["canaries"],
        "clarifications": len(clarifications.read_text().splitlines())
        if clarifications.exists()
        else 0,
        "mapping": mapping,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", type=Path, default=REPO.parent / "shared" / "data" / "dev")
    parser.add_argument("--rates", type=float, nargs="+", default=[0.05, 0.15])
    parser.add_argument("--pack-tokens", type=int, help="--llm-pack-tokens [the default]")
    args = parser.parse_args()
    packing = [] if args.pack_tokens is None else ["--llm-pack-tokens", str(args.pack_tokens)]
    gold = load_gold(args.dev / "gold.jsonl")
    records = labelled_relations(args.dev / "gold.jsonl")
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows["rules only"] = run(args.dev, root / "none", ["--llm", "none"])
        runs = [("at chance, canaries off", 0.5, 0.0)]
        runs += [(f"at chance, canaries {rate:g}", 0.5, rate) for rate in args.rates]
        runs += [("gold, canaries off", 0.0, 0.0), ("gold, canaries 0.05", 0.0, 0.05)]
        for label, error_rate, rate in runs:
            with JudgeServer(GoldJudge(gold, error_rate, records=records)) as server:
                llm = ["--llm-base-url", server.base_url, "--llm-model", "gold-judge", *packing]
                out = root / label.replace(" ", "_").replace(",", "")
                rows[label] = run(args.dev, out, [*llm, "--canaries", str(rate)])
    print(
        f"{'run':<28}{'pair P':>8}{'pair R':>8}{'pair F1':>8}{'hard-neg':>9}{'requests':>9}"
        f"{'canaries right/answered':>30}{'exit':>6}"
    )
    for label, row in rows.items():
        c = row["canaries"]
        verdict = str(c.get("verdict", "")).replace("_", " ")
        tally = f"{c['right']}/{c['answered']}" + (f" {verdict}" if c["answered"] else "")
        print(
            f"{label:<28}{row['pair_precision']:>8.3f}{row['pair_recall']:>8.3f}"
            f"{row['pair_f1']:>8.3f}{len(row['hard_negative_merges']):>9}"
            f"{row['llm_requests']:>9}{tally:>30}{row['exit']:>6}"
        )
    rules, off, on = rows["rules only"], rows["gold, canaries off"], rows["gold, canaries 0.05"]
    targets = {
        "gold: extra requests": round(on["llm_requests"] / off["llm_requests"] - 1, 4),
        "gold: same output": on["mapping"] == off["mapping"],
    }
    for rate in args.rates:
        row = rows[f"at chance, canaries {rate:g}"]
        targets[f"at chance {rate:g}: P >= rules-only - 0.01"] = (
            row["pair_precision"] >= rules["pair_precision"] - 0.01
        )
        targets[f"at chance {rate:g}: hard negatives <= rules-only"] = len(
            row["hard_negative_merges"]
        ) <= len(rules["hard_negative_merges"])
    for name, value in targets.items():
        print(f"  {name}: {value}")
    for row in rows.values():
        row.pop("mapping")
    print(json.dumps({"rows": rows, "targets": targets}, ensure_ascii=False))


if __name__ == "__main__":
    main()
