"""Benchmark of relmerge's exact stage (``run_pipeline`` with ``semantic_merge=False``).

Usage::

    python bench/exact_stage.py [--sizes 10000 100000] [--seed 0] [--no-heta]
                                [--llm none instant] [--stores local memory]
                                [--repeat 1] [--no-trace] [--profile]

For each size, a batch is generated with :func:`synthetic.generate` (seeded) and written to
a temporary JSONL file. Then, for each language model and store, one fresh subprocess
(``exact_stage.py --one SIZE MODE --store STORE --input FILE``) reads the batch with
relmerge's JSONL reader (not timed) and runs ``run_pipeline`` (entity mapping None):

* ``--llm none``: ``NoLanguageModel()`` (rules only: identical descriptions merge, other
  groups are logged as ``llm_needed``);
* ``--llm instant``: ``instant_merge_model()`` (answers every merge at once by keeping the
  first record's fields), so the figures are relmerge's own overhead, with no network;
* ``--stores``: ``LocalStore`` on a fresh temporary directory, and/or ``MemoryStore``.

Each subprocess reports relations in/out, exact merges, LLM requests, the wall time of
``run_pipeline`` (``perf_counter``; one untraced run), relations/s, the process peak RSS
(``ru_maxrss``, after loading the input and after the run), and the peak of Python
allocations during a second, traced run of the same configuration (``tracemalloc``; it
counts only allocations made during ``run_pipeline``, the loaded input is not in it).
A fresh process per measurement keeps peaks from mixing. ``--repeat N`` runs every
measurement N times (fresh processes) and reports the median time.

Unless ``--no-heta``: a venv ``bench/.venv-heta`` (created once, then reused) gets
``heta-framework==0.1.2`` from PyPI, and ``bench/heta_runner.py`` runs the reference step
on the SAME 10k batch file with its instant-model counterpart and an in-memory store (and
its ``LocalObjectStore``). The table then shows ``heta_seconds / relmerge_seconds`` for
(10k, instant model, memory store), both measured in this run. Heta's timed ``step.run``
also reads and parses the records from its store; relmerge's ``run_pipeline`` gets them
already parsed, so the ``relmerge step.run`` row times relmerge's full
``DeduplicateRelations.run`` (read + parse from a ``MemoryStore`` + pipeline) as well.

``--profile`` runs each measurement under cProfile instead of tracemalloc and prints the
top functions (by own time and by cumulative time) of every run.

Output: a table on stdout, then one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import orjson

from relmerge.config import DeduplicateRelationsConfig
from relmerge.context import DictContext
from relmerge.io.load import read_jsonl
from relmerge.io.records import RawRecord
from relmerge.providers.base import LanguageModel, NoLanguageModel
from relmerge.providers.fake import instant_merge_model
from relmerge.run.pipeline import run_pipeline
from relmerge.run.result import RunOutput
from relmerge.run.step import DeduplicateRelations
from relmerge.stores import LocalStore, MemoryStore
from relmerge.stores.base import ObjectStore
from synthetic import generate  # bench/ is on sys.path when this file runs as a script

BENCH_DIR = Path(__file__).resolve().parent
HETA_VENV = BENCH_DIR / ".venv-heta"
HETA_RUNNER = BENCH_DIR / "heta_runner.py"
HETA_REQUIREMENT = "heta-framework==0.1.2"
HETA_VERSION = "0.1.2"
HETA_SIZE = 10_000
MODES = ("none", "instant")
STORES = ("local", "memory")
MIB = 1024 * 1024

T = TypeVar("T")


# --------------------------------------------------------------------------- child side


def _maxrss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024  # Linux reports KiB


def _language_model(mode: str) -> LanguageModel:
    return NoLanguageModel() if mode == "none" else instant_merge_model()


def _config() -> DeduplicateRelationsConfig:
    return DeduplicateRelationsConfig(semantic_merge=False, entity_id_mapping_artifact=None)


async def _run_once(raws: Sequence[RawRecord], mode: str, store: ObjectStore) -> RunOutput:
    return await run_pipeline(raws, None, _config(), _language_model(mode), store)


async def _timed(
    raws: Sequence[RawRecord], mode: str, store: ObjectStore
) -> tuple[float, RunOutput]:
    started = time.perf_counter()
    output = await _run_once(raws, mode, store)
    return time.perf_counter() - started, output


async def _timed_step(raws: Sequence[RawRecord], mode: str) -> tuple[float, RunOutput]:
    """relmerge's whole step, like Heta's timing: read + parse from the store, then dedup."""
    store = MemoryStore()
    keys = []
    for index, raw in enumerate(raws):
        key = f"relations/{index:07d}.json"
        await store.put(key, orjson.dumps(raw.data))
        keys.append(key)
    config = _config()
    context = DictContext(
        components={"stores.objects": store, "models.language": _language_model(mode)},
        artifacts={config.relation_keys_artifact: keys},
    )
    step = DeduplicateRelations(config)
    started = time.perf_counter()
    output = await step.run(context)
    return time.perf_counter() - started, output


def _with_store(kind: str, action: Callable[[ObjectStore], T]) -> T:
    """Run ``action(store)`` with a fresh store; a local one lives in a fresh temp dir."""
    if kind == "memory":
        return action(MemoryStore())
    root = tempfile.mkdtemp(prefix="relmerge-bench-")
    try:
        return action(LocalStore(root))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _profile_report(profile: cProfile.Profile, limit: int = 25) -> str:
    text = io.StringIO()
    stats = pstats.Stats(profile, stream=text)
    stats.strip_dirs().sort_stats("tottime").print_stats(limit)
    stats.sort_stats("cumulative").print_stats(limit)
    return text.getvalue()


def run_one(size: int, mode: str, store_kind: str, path: Path, trace: bool, profile: bool) -> int:
    """Child process: one measurement, printed as one JSON line (profile text on stderr)."""
    raws = list(read_jsonl(path))
    if len(raws) != size:
        raise SystemExit(f"{path} holds {len(raws)} records, expected {size}")
    gc.collect()
    rss_loaded = _maxrss_bytes()

    if store_kind == "step":  # DeduplicateRelations.run over a MemoryStore
        seconds, output = asyncio.run(_timed_step(raws, mode))
    else:
        seconds, output = _with_store(
            store_kind, lambda store: asyncio.run(_timed(raws, mode, store))
        )
    rss_peak = _maxrss_bytes()
    result: dict[str, Any] = output.result
    report: dict[str, Any] = {
        "size": size,
        "llm": mode,
        "store": store_kind,
        "relations": result["input_relation_count"],
        "output_relations": result["output_relation_count"],
        "exact_merges": result["exact_merge_count"],
        "llm_requests": result["llm_requests"],
        "llm_needed_groups": result["llm_needed_group_count"],
        "exact_rounds": result["exact_round_count"],
        "rejected": result["rejected_count"],
        "seconds": round(seconds, 4),
        "relations_per_s": round(size / seconds, 1) if seconds > 0 else None,
        "stage_seconds": result["seconds"],
        "maxrss_loaded_mib": round(rss_loaded / MIB, 1),
        "maxrss_mib": round(rss_peak / MIB, 1),
        "tracemalloc_peak_mib": None,
    }
    del output
    gc.collect()

    if profile:
        profiler = cProfile.Profile()
        if store_kind == "step":
            profiler.runcall(lambda: asyncio.run(_timed_step(raws, mode)))
        else:
            _with_store(
                store_kind,
                lambda store: profiler.runcall(lambda: asyncio.run(_run_once(raws, mode, store))),
            )
        header = f"==== cProfile: size={size} llm={mode} store={store_kind} ===="
        print(header + "\n" + _profile_report(profiler), file=sys.stderr)
    elif trace:
        tracemalloc.start()
        if store_kind == "step":
            asyncio.run(_timed_step(raws, mode))
        else:
            _with_store(store_kind, lambda store: asyncio.run(_run_once(raws, mode, store)))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        report["tracemalloc_peak_mib"] = round(peak / MIB, 1)
    print(json.dumps(report))
    return 0


# -------------------------------------------------------------------------- parent side


def _last_json_line(text: str) -> dict[str, Any]:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            value: dict[str, Any] = json.loads(line)
            return value
    raise RuntimeError(f"no JSON line in output:\n{text}")


def _child(
    size: int, mode: str, store: str, path: Path, args: argparse.Namespace
) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--one", str(size), mode]
    command += ["--store", store, "--input", str(path)]
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
    report = reports[0]
    if len(reports) > 1:
        times = [r["seconds"] for r in reports]
        report["seconds"] = round(statistics.median(times), 4)
        report["seconds_all"] = times
        report["relations_per_s"] = round(size / report["seconds"], 1)
    return report


def _write_batch(size: int, seed: int, directory: Path) -> Path:
    path = directory / f"relations-{size}-seed{seed}.jsonl"
    with path.open("wb") as handle:
        for record in generate(size, seed):
            handle.write(orjson.dumps(record) + b"\n")
    return path


def _heta_python() -> Path:
    return HETA_VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure_heta_venv() -> Path:
    """Create ``bench/.venv-heta`` with heta-framework 0.1.2 unless it is already there."""
    python = _heta_python()
    probe = "import importlib.metadata as m; print(m.version('heta-framework'))"
    if python.exists():
        found = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
        if found.returncode == 0 and found.stdout.strip() == HETA_VERSION:
            return python
    print(f"creating {HETA_VENV} with {HETA_REQUIREMENT} ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(HETA_VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, HETA_REQUIREMENT], check=True)
    return python


def run_heta(python: Path, path: Path, store: str, repeat: int) -> dict[str, Any]:
    command = [str(python), str(HETA_RUNNER), "--input", str(path), "--store", store, "--stats"]
    reports = []
    for _ in range(repeat):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.stderr:
            sys.stderr.write(done.stderr)
        report = _last_json_line(done.stdout)
        if done.returncode != 0 or report.get("error"):
            raise RuntimeError(f"heta runner failed: {report.get('error') or done.returncode}")
        reports.append(report)
    report = reports[0]
    report["store"] = store
    if len(reports) > 1:
        times = [r["seconds"] for r in reports]
        report["seconds"] = round(statistics.median(times), 4)
        report["seconds_all"] = times
    return report


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def print_table(rows: list[dict[str, Any]]) -> None:
    columns = (
        ("size", "size", 0),
        ("llm", "llm", 0),
        ("store", "store", 0),
        ("relations", "relations", 0),
        ("output", "output_relations", 0),
        ("exact merges", "exact_merges", 0),
        ("LLM req", "llm_requests", 0),
        ("llm-needed", "llm_needed_groups", 0),
        ("seconds", "seconds", 3),
        ("relations/s", "relations_per_s", 0),
        ("py peak MiB", "tracemalloc_peak_mib", 1),
        ("rss load MiB", "maxrss_loaded_mib", 1),
        ("rss peak MiB", "maxrss_mib", 1),
    )
    cells = [[title for title, _, _ in columns]]
    for row in rows:
        cells.append([_fmt(row.get(key), digits) for _, key, digits in columns])
    _print_cells(cells)


def print_stage_table(rows: list[dict[str, Any]]) -> None:
    """Where ``run_pipeline``'s own clock puts the time (its ``result["seconds"]``)."""
    stages = ("load", "remap", "exact", "write", "total")
    cells = [["size", "llm", "store", *(f"{stage} s" for stage in stages)]]
    for row in rows:
        split = row.get("stage_seconds") or {}
        cells.append(
            [_fmt(row["size"]), row["llm"], row["store"], *(_fmt(split.get(s)) for s in stages)]
        )
    _print_cells(cells)


def _print_cells(cells: list[list[str]]) -> None:
    widths = [max(len(line[i]) for line in cells) for i in range(len(cells[0]))]
    for number, line in enumerate(cells):
        print("  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=True)))
        if number == 0:
            print("  ".join("-" * width for width in widths))


def _find(rows: list[dict[str, Any]], size: int, llm: str, store: str) -> dict[str, Any] | None:
    return next((r for r in rows if (r["size"], r["llm"], r["store"]) == (size, llm, store)), None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark relmerge's exact stage.")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-heta", action="store_true", help="skip the heta comparison")
    parser.add_argument("--llm", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement (median)")
    parser.add_argument("--no-trace", action="store_true", help="skip the tracemalloc run")
    parser.add_argument("--profile", action="store_true", help="cProfile each run (stderr)")
    parser.add_argument("--one", nargs=2, metavar=("SIZE", "MODE"), help=argparse.SUPPRESS)
    parser.add_argument("--store", choices=(*STORES, "step"), help=argparse.SUPPRESS)
    parser.add_argument("--input", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.one:
        size, mode = int(args.one[0]), args.one[1]
        if mode not in MODES or args.store is None or args.input is None:
            parser.error("--one SIZE MODE needs MODE in none/instant, --store and --input")
        return run_one(size, mode, args.store, args.input, not args.no_trace, args.profile)
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")

    heta_python = None if args.no_heta else ensure_heta_venv()
    rows: list[dict[str, Any]] = []
    heta_rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="relmerge-bench-data-") as tmp:
        sizes = list(dict.fromkeys(args.sizes))
        if heta_python is not None and HETA_SIZE not in sizes:
            sizes.insert(0, HETA_SIZE)
        for size in sizes:
            path = _write_batch(size, args.seed, Path(tmp))
            measured = size in args.sizes
            for mode in args.llm if measured else []:
                for store in args.stores:
                    rows.append(_child(size, mode, store, path, args))
                    print(f"  done: {size} {mode} {store}", file=sys.stderr)
            if heta_python is None or size != HETA_SIZE:
                continue
            # The comparison pair: relmerge (instant, memory) and its whole step.
            if _find(rows, size, "instant", "memory") is None:
                rows.append(_child(size, "instant", "memory", path, args))
            rows.append(_child(size, "instant", "step", path, args))
            for store in ("memory", "local"):
                heta_rows.append(run_heta(heta_python, path, store, args.repeat))
                print(f"  done: heta {size} {store}", file=sys.stderr)

    print(f"relmerge exact stage (run_pipeline, semantic_merge=False), seed {args.seed}")
    print("store 'step' = DeduplicateRelations.run incl. reading+parsing from a MemoryStore")
    print_table(rows)
    print()
    print("stage split of the same runs (run_pipeline's own clock; 'load' = validation)")
    print_stage_table(rows)
    summary: dict[str, Any] = {"seed": args.seed, "relmerge": rows, "heta": heta_rows}
    if heta_rows:
        print()
        print(f"heta-framework {HETA_VERSION} DeduplicateRelations (exact stage), same batch")
        pairs = (("memory", "memory"), ("memory", "step"), ("local", "local"))
        comparisons = []
        for heta_store, relmerge_store in pairs:
            heta = next(h for h in heta_rows if h["store"] == heta_store)
            ours = _find(rows, HETA_SIZE, "instant", relmerge_store)
            if ours is None:
                continue
            ratio = heta["seconds"] / ours["seconds"]
            comparisons.append(
                {
                    "size": HETA_SIZE,
                    "heta_store": heta_store,
                    "relmerge_store": relmerge_store,
                    "heta_seconds": heta["seconds"],
                    "relmerge_seconds": ours["seconds"],
                    "ratio_heta_over_relmerge": round(ratio, 3),
                    "heta_output_relations": heta["output_relations"],
                    "relmerge_output_relations": ours["output_relations"],
                    "heta_llm_calls": heta.get("llm_calls"),
                    "relmerge_llm_requests": ours["llm_requests"],
                }
            )
            print(
                f"  {HETA_SIZE:,} relations, instant model, heta store={heta_store:6} "
                f"vs relmerge {relmerge_store:6}: heta {heta['seconds']:.3f} s "
                f"({heta['output_relations']:,} out, {heta.get('llm_calls', 0):,} LLM calls), "
                f"relmerge {ours['seconds']:.3f} s ({ours['output_relations']:,} out, "
                f"{ours['llm_requests']:,} LLM requests) -> heta/relmerge = {ratio:.2f}"
            )
        summary["comparison"] = comparisons
        headline = next((c for c in comparisons if c["relmerge_store"] == "memory"), None)
        if headline is not None:
            summary["heta_seconds"] = headline["heta_seconds"]
            summary["relmerge_seconds"] = headline["relmerge_seconds"]
            summary["ratio_heta_over_relmerge"] = headline["ratio_heta_over_relmerge"]
    print(json.dumps(summary, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
