"""End-to-end scale benchmark: ``relmerge run`` on N synthetic relations, no LLM.

The batch comes from ``bench/synthetic.generate_semantic`` (its docstring documents the
structure: blocks of 1–20 records per entity pair, 1–4 facts per block, mentions in
English, Chinese and French, hard negatives with other years / amounts / roles, reversed
facts). This script measures and prints that structure for the batch it runs — exact-key
duplicates, paraphrases (same fact, other text; how many in another language), hard
negatives, block sizes — then runs the CLI in a child process with the default embedder
and ``--llm none --no-cache`` and prints the time per stage (from the result file), the
CPU per stage of the driver and of the worker processes (the result's ``engine``), the
end-to-end wall time and the peak RSS of the child's whole process tree (worker and
embedding helper processes included; sampled every 0.25 s), against the targets at 1M on
2 cores (semantic shape 300 s, GraphRAG shape 240 s, 3 GB). ``--workers`` is passed to
the run (``0``: everything in one process, the baseline of the worker processes).

    .venv/bin/python bench/scale.py --size 1000000
    .venv/bin/python bench/scale.py --size 100000 --embedding hash
    .venv/bin/python bench/scale.py --size 1000000 --shape graphrag [--workers 0]

``--shape graphrag`` gives the batch the shape of real GraphRAG output (90% of entity
pairs with one relation; description lengths drawn from the GraphRAG relations in
``../shared/data/real/graphrag-christmas-carol``).

The cross-block ``possible_entity_duplicate`` report is sampled, not skipped: it compares
at most ``entity_report_limit`` (200) relations per entity.
"""

from __future__ import annotations

import argparse
import json
import os
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
from synthetic import generate_semantic, graphrag_descriptions

TARGETS = {"semantic": (300, 3072), "graphrag": (240, 3072)}  # seconds, MiB at 1M


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


def _tree_rss_kib(root: int) -> int:
    """Resident memory of ``root`` and all its descendants (the embedding helper too)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        pid = int(entry.name)
        children.setdefault(int(fields["PPid"].strip()), []).append(pid)
        rss[pid] = int(fields.get("VmRSS", "0 kB").split()[0])
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def _watch_tree_rss(child: subprocess.Popen[bytes]) -> float:
    """Wait for ``child``, sampling its process tree's RSS; the peak in MiB."""
    peak = 0
    while child.poll() is None:
        peak = max(peak, _tree_rss_kib(child.pid))
        time.sleep(0.25)
    return peak / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--embedding", choices=["use", "hash"], default="use")
    parser.add_argument("--shape", choices=["semantic", "graphrag"], default="semantic")
    parser.add_argument(
        "--workers",
        type=int,
        help="passed to relmerge run (0: one process; default: the run chooses)",
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="run twice on the same batch: the full model for every text "
        "(two_stage_embedding = false, the pipeline before the first stage), then the "
        "default; checks the two id mappings are the same",
    )
    args = parser.parse_args()
    target_seconds, target_mib = TARGETS[args.shape]

    started = time.perf_counter()
    texts = graphrag_descriptions() if args.shape == "graphrag" else []
    records, gold = generate_semantic(args.size, args.seed, args.shape, texts)
    shape = structure(records, gold)
    print(f"generated in {time.perf_counter() - started:.1f} s: {json.dumps(shape)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="relmerge-scale-") as tmp:
        path = Path(tmp) / "relations.jsonl"
        with path.open("wb") as handle:
            for record in records:
                handle.write(orjson.dumps(record) + b"\n")
        del records, gold
        mappings = []
        for full_model in [True, False] if args.compare else [False]:
            out = Path(tmp) / ("out-full" if full_model else "out")
            print("the full model for every text" if full_model else "the default", flush=True)
            mappings.append(
                _run(args, Path(tmp), path, out, full_model, target_seconds, target_mib)
            )
        # Removed only after the last run: creating a million files right after a million
        # were deleted costs several times the kernel CPU on some disks (docs/figures/speed.md).
        if args.compare:
            print(f"the same id mapping: {mappings[0] == mappings[1]}", flush=True)


def _run(
    args: argparse.Namespace,
    tmp: Path,
    path: Path,
    out: Path,
    full_model: bool,
    target_seconds: int,
    target_mib: int,
) -> bytes:
    """One ``relmerge run`` in a child process, reported; its id mapping's bytes."""
    command = [sys.executable, "-m", "relmerge", "run", str(path), "--output", str(out)]
    command += ["--llm", "none", "--no-cache", "--embedding", args.embedding, "-q"]
    if args.workers is not None:
        command += ["--workers", str(args.workers)]
    if full_model:
        config = tmp / "full-model.toml"
        config.write_text("two_stage_embedding = false\n")
        command += ["--config", str(config)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    child = subprocess.Popen(command)
    peak_mib = _watch_tree_rss(child)
    if child.returncode != 0:
        raise SystemExit(f"relmerge run failed with exit code {child.returncode}")
    wall = time.perf_counter() - started
    # The run's processes (its embedding helper included: the run reaps it at the end).
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user, kernel = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    # ru_maxrss of the biggest process: a check on the sampled figure of the whole tree.
    peak_mib = max(peak_mib, after.ru_maxrss / 1024 if not args.compare else 0)
    result = orjson.loads((out / "deduplicate_relations_result.json").read_bytes())
    _report(args, {}, result, wall, peak_mib, (user, kernel), target_seconds, target_mib)
    return (out / "relation_id_mapping.json").read_bytes()


def _report(
    args: argparse.Namespace,
    shape: dict[str, Any],
    result: dict[str, Any],
    wall: float,
    peak_mib: float,
    usage: tuple[float, float],
    target_seconds: int,
    target_mib: int,
) -> None:
    seconds = result["seconds"]
    engine = result["engine"]
    cpu = {
        stage: [round(spent["driver_s"], 1), round(spent["workers_s"], 1)]
        for stage, spent in engine["stages"].items()
        if spent["driver_s"] + spent["workers_s"] >= 0.05
    }
    print(f"stages (wall s): {json.dumps(seconds)}")
    print(
        f"CPU per stage (s, [driver, workers]) with {engine['workers']} worker processes: "
        f"{json.dumps(cpu)}; driver {engine['driver_cpu_s']:.0f} s, "
        f"workers {engine['worker_cpu_s']:.0f} s"
    )
    print(
        f"{args.size:,} relations -> {result['output_relation_count']:,}: "
        f"{wall:.1f} s end to end (target {target_seconds} s), "
        f"peak RSS {peak_mib:,.0f} MiB (target {target_mib:,} MiB), "
        f"{args.size / wall:,.0f} relations/s; CPU of the run's processes: "
        f"{usage[0]:.0f} s user, {usage[1]:.0f} s kernel"
    )
    print(
        json.dumps(
            {
                "seconds": seconds,
                "wall_seconds": round(wall, 1),
                "peak_rss_mib": round(peak_mib),
                "cpu_user_s": round(usage[0], 1),
                "cpu_kernel_s": round(usage[1], 1),
                "output_relations": result["output_relation_count"],
                "chunks": result["chunk_count"],
                "embedding": args.embedding,
                "shape": args.shape,
                "texts_embedded": result["engine"]["texts_embedded"],
                "texts_embedded_by": result["engine"].get("texts_embedded_by", {}),
                "workers": engine["workers"],
                "worker_cpu_s": engine["worker_cpu_s"],
                "cpu_per_stage": cpu,
                "driver_cpu_s": result["engine"]["driver_cpu_s"],
                "load_average": os.getloadavg(),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
