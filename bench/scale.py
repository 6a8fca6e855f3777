"""End-to-end scale benchmark: ``relmerge run`` on N synthetic relations, no LLM.

The batch comes from ``bench/synthetic.generate_semantic`` (its docstring documents the
structure: blocks of 1–20 records per entity pair, 1–4 facts per block, mentions in
English, Chinese and French, hard negatives with other years / amounts / roles, reversed
facts). This script measures and prints that structure for the batch it runs — exact-key
duplicates, paraphrases (same fact, other text; how many in another language), hard
negatives, block sizes — then runs the CLI in a child process with the default embedder
and ``--llm none --no-cache`` and prints the time per stage (from the result file), the
end-to-end wall time and the child's peak RSS, against the targets (10 minutes, 4 GB).

    .venv/bin/python bench/scale.py --size 1000000
    .venv/bin/python bench/scale.py --size 100000 --embedding hash

The cross-block ``possible_entity_duplicate`` report is sampled, not skipped: it compares
at most ``entity_report_limit`` (200) relations per entity.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from relmerge.normalize import normalize_key_text
from synthetic import generate_semantic

TARGET_SECONDS = 600
TARGET_MIB = 4096


def _language(text: str) -> str:
    if any("\u4e00" <= ch <= "\u9fff" for ch in text):
        return "zh"
    return "fr" if any(ch in "éèàçêâîôû" for ch in text) else "en/fr"


def structure(records: list[dict[str, Any]], gold: dict[str, str]) -> dict[str, Any]:
    """Shares of the kinds of record the generator promises, measured on this batch."""
    keys: set[tuple[str, str, str, str]] = set()
    first_of_fact: dict[str, dict[str, Any]] = {}
    block_facts: dict[frozenset[str], list[str]] = {}
    exact = paraphrase = other_language = hard_negative = 0
    block_sizes: Counter[frozenset[str]] = Counter()
    for record in records:
        pair = frozenset((record["source_entity_id"], record["target_entity_id"]))
        block_sizes[pair] += 1
        key = (
            record["source_entity_id"],
            record["target_entity_id"],
            normalize_key_text(record["name"]),
            normalize_key_text(record["type"]),
        )
        exact += key in keys
        keys.add(key)
        fact = gold[record["relation_id"]]
        facts = block_facts.setdefault(pair, [])
        if fact not in facts:
            facts.append(fact)
        hard_negative += facts.index(fact) > 0  # another fact of the same entity pair
        first = first_of_fact.setdefault(fact, record)
        if first is not record and first["description"] != record["description"]:
            paraphrase += 1
            other_language += _language(first["description"]) != _language(record["description"])
    n = len(records)
    sizes = list(block_sizes.values())
    return {
        "records": n,
        "exact_key_duplicates": round(exact / n, 3),
        "paraphrases": round(paraphrase / n, 3),
        "paraphrases_in_another_language": round(other_language / n, 3),
        "hard_negatives": round(hard_negative / n, 3),
        "blocks": len(sizes),
        "block_size_min": min(sizes),
        "block_size_max": max(sizes),
        "block_size_mean": round(n / len(sizes), 2),
        "facts": len(first_of_fact),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--embedding", choices=["use", "hash"], default="use")
    args = parser.parse_args()

    started = time.perf_counter()
    records, gold = generate_semantic(args.size, args.seed)
    shape = structure(records, gold)
    print(f"generated in {time.perf_counter() - started:.1f} s: {json.dumps(shape)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="relmerge-scale-") as tmp:
        path = Path(tmp) / "relations.jsonl"
        with path.open("wb") as handle:
            for record in records:
                handle.write(orjson.dumps(record) + b"\n")
        del records, gold
        out = Path(tmp) / "out"
        command = [sys.executable, "-m", "relmerge", "run", str(path), "--output", str(out)]
        command += ["--llm", "none", "--no-cache", "--embedding", args.embedding, "-q"]
        started = time.perf_counter()
        subprocess.run(command, check=True)
        wall = time.perf_counter() - started
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        result = orjson.loads((out / "deduplicate_relations_result.json").read_bytes())
    seconds = result["seconds"]
    print(f"stages (s): {json.dumps(seconds)}")
    print(
        f"{args.size:,} relations -> {result['output_relation_count']:,}: "
        f"{wall:.1f} s end to end (target {TARGET_SECONDS} s), "
        f"peak RSS {peak_mib:,.0f} MiB (target {TARGET_MIB:,} MiB), "
        f"{args.size / wall:,.0f} relations/s"
    )
    print(
        json.dumps(
            {
                "structure": shape,
                "seconds": seconds,
                "wall_seconds": round(wall, 1),
                "peak_rss_mib": round(peak_mib),
                "output_relations": result["output_relation_count"],
                "embedding": args.embedding,
            }
        )
    )


if __name__ == "__main__":
    main()
