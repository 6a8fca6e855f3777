"""Dev-set quality and cost of the full pipeline, through the CLI and a loopback judge.

    python bench/semantic_dev.py [--dev ../shared/data/dev] [--pack-tokens N]

Runs ``relmerge run`` on the dev set (entity mapping + entities file) three ways — with
``--llm none``, with the gold-answering judge server, and with the judge giving 10% wrong
answers — then ``relmerge eval``, and counts merges that join the two sides of any pair
in ``hard_negatives.jsonl``. Prints a table and a final JSON line. ``--pack-tokens`` is
passed on as ``--llm-pack-tokens`` (unset: the run's default; 0: one request per question).
"""

from __future__ import annotations

import argparse
import collections
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

REPO = Path(__file__).resolve().parents[1]
RELMERGE = [sys.executable, "-m", "relmerge"]


def hard_negative_merges(dev: Path, mapping: dict[str, str], gold: dict[str, str]) -> list[str]:
    outputs: dict[str, set[str]] = collections.defaultdict(set)
    for relation_id, cluster in gold.items():
        outputs[cluster].add(mapping[relation_id])
    bad = []
    for line in (dev / "hard_negatives.jsonl").read_text().splitlines():
        pair = json.loads(line)
        if outputs[pair["cluster_a"]] & outputs[pair["cluster_b"]]:
            bad.append(f"{pair['category']}: {pair['cluster_a']} ~ {pair['cluster_b']}")
    return bad


def run(dev: Path, out: Path, extra: list[str]) -> dict[str, Any]:
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
        *extra,
    ]
    subprocess.run(command, check=True)
    report = subprocess.run(
        [*RELMERGE, "eval", str(out), "--gold", str(dev / "gold.jsonl"), "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    figures: dict[str, Any] = json.loads(report.stdout)
    result = json.loads((out / "deduplicate_relations_result.json").read_text())
    figures["llm_requests_per_relation"] = round(
        result["llm_requests"] / result["input_relation_count"], 4
    )
    figures["decisions_by_tier"] = result["decisions_by_tier"]
    figures["seconds"] = result["seconds"]["total"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", type=Path, default=REPO.parent / "shared" / "data" / "dev")
    parser.add_argument("--pack-tokens", type=int, help="--llm-pack-tokens [the default]")
    args = parser.parse_args()
    packing = [] if args.pack_tokens is None else ["--llm-pack-tokens", str(args.pack_tokens)]
    gold = load_gold(args.dev / "gold.jsonl")
    records = labelled_relations(args.dev / "gold.jsonl")
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows["llm none"] = run(args.dev, root / "none", ["--llm", "none"])
        for label, rate in (("gold judge", 0.0), ("gold judge, 10% wrong", 0.1)):
            with JudgeServer(GoldJudge(gold, rate, records=records)) as server:
                rows[label] = run(
                    args.dev,
                    root / label.replace(" ", "_").replace(",", "").replace("%", ""),
                    ["--llm-base-url", server.base_url, "--llm-model", "gold-judge", *packing],
                )
                rows[label]["server_requests"] = server.requests
        for label, out in zip(rows, ["none", "gold_judge", "gold_judge_10_wrong"], strict=True):
            mapping = json.loads((root / out / "relation_id_mapping.json").read_text())
            rows[label]["hard_negative_merges"] = hard_negative_merges(args.dev, mapping, gold)
    print(
        f"{'run':<24}{'pair P':>8}{'pair R':>8}{'pair F1':>8}{'B3 F1':>8}{'req/rel':>9}"
        f"{'hard-neg merges':>17}{'clusters':>10}"
    )
    for label, row in rows.items():
        print(
            f"{label:<24}{row['pair_precision']:>8.3f}{row['pair_recall']:>8.3f}"
            f"{row['pair_f1']:>8.3f}{row['bcubed_f1']:>8.3f}"
            f"{row['llm_requests_per_relation']:>9.3f}{len(row['hard_negative_merges']):>17}"
            f"{row['predicted_clusters']:>10}"
        )
    for label, row in rows.items():
        for merge in row["hard_negative_merges"]:
            print(f"  {label}: hard negative merged: {merge}")
    print(json.dumps(rows, ensure_ascii=False))


if __name__ == "__main__":
    main()
