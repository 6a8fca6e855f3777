"""Same outputs: one digest per run of a fixed matrix of real ``relmerge run`` commands.

A refactor that must not change behaviour is checked with it: run it on the code before
the change, save what it prints, run it again after, and compare. Every run goes through
the CLI (``python -m relmerge run``, this checkout's ``src`` first on ``PYTHONPATH``) into
a fresh temporary OUT, and its line holds the sha256 of what must not change:

* ``outputs``: every ``deduplicated_relations/*.json`` byte for byte (by name),
  ``relation_id_mapping.json`` and ``deduplicated_relation_keys.json``;
* ``logs``: the lines of ``decisions.jsonl`` and ``clarifications.jsonl``, with the
  fields that legitimately vary removed (``cached``; ``prompt``, the prompt's name and
  version, which a later version may add to LLM decisions);
* ``result``: ``deduplicate_relations_result.json`` without what a run measures
  (``seconds``, ``engine``) — counts, requests, tokens, issues, config, and the
  fingerprint (but for runs that ask the gold judge: its port is in the fingerprint).

The matrix: the dev set (``../shared/data/dev``: relations, entity mapping, entities)
rules-only with the model-free embedder and with the default one; with the
gold-answering judge (``bench/judge_server.py`` over loopback HTTP, answers from
``gold.jsonl``), with and without the semantic stage; in small chunks
(``records_per_chunk`` 40 through ``--config``) in this process, on two worker
processes, on the engine the run chooses and on Ray tasks (local Ray: the ``ray``
extra); then the five real graphs of ``bench/real_sources.py`` rules-only and with the
gold judge answering from their hand labels (``bench/data/real_labels``, via
``bench/labelled.py``), one of them with the default embedder too. Last, the Python step
(``DeduplicateRelations`` over a memory store) on the dev set, rules only and with the
gold judge and a run cache, whose fingerprint is computed apart from the CLI's.

To compare against code that is not checked out, export it (``git archive COMMIT``) into
a folder beside ``../shared`` (the data is found at ``REPO/../shared/data``), copy this
script into its ``bench/`` and run it there with that folder's ``src``.

    PYTHONPATH=src python bench/same_outputs.py > /tmp/before.txt       # old code
    PYTHONPATH=src python bench/same_outputs.py --compare /tmp/before.txt  # new code

``--compare FILE`` prints each run's line with ``ok`` or ``DIFFERENT`` (and which of the
three digests differ) and exits 1 if any differs. ``--only NAME`` (repeatable) runs only
the named runs. Timings go to standard error (``--times``: one line per run), never into
the digests.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import inspect
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from judge_server import JudgeServer
from labelled import load_real
from real_sources import REAL, REPO, SHARED, SOURCES, load_source
from relmerge.eval.gold_judge import GoldJudge

DEV = SHARED / "dev"
VARYING_LOG_FIELDS = ("cached", "prompt")
MEASURED_RESULT_KEYS = ("seconds", "engine")
SMALL_CHUNKS = "records_per_chunk = 40\n"
Labels = tuple[dict[str, str], list[dict[str, Any]]]  # gold labels, the records they label


@dataclass
class Run:
    """One ``relmerge run``: its name, input and the arguments after ``--output OUT``."""

    name: str
    input: Callable[[Path], Path]  # given a scratch folder, the input file
    args: list[str] = field(default_factory=list)
    gold: Callable[[], Labels] | None = None  # answers of the gold judge, if any
    config: str | None = None  # a relmerge.toml for --config


def _dev_input(_: Path) -> Path:
    return DEV / "relations.jsonl"


def _dev_gold() -> Labels:
    gold = {}
    for line in (DEV / "gold.jsonl").read_bytes().splitlines():
        if line.strip():
            item = orjson.loads(line)
            gold[item["relation_id"]] = item["cluster"]
    lines = (DEV / "relations.jsonl").read_bytes().splitlines()
    return gold, [orjson.loads(line) for line in lines if line.strip()]


def _judge(labels: Labels) -> GoldJudge:
    """The gold judge, recognising records shown under other ids by their labelled text."""
    gold, records = labels
    if "records" not in inspect.signature(GoldJudge).parameters:
        return GoldJudge(gold)  # an older checkout (this script copied there): ids only
    return GoldJudge(gold, records=records)


def _real_input(source: str) -> Callable[[Path], Path]:
    def make(scratch: Path) -> Path:
        if source in REAL:
            return SHARED / "real" / source / "relations.jsonl"
        path = scratch / f"{source}.jsonl"  # a LightRAG folder, imported as the bench reads it
        if not path.exists():
            path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in load_source(source)))
        return path

    return make


def matrix() -> list[Run]:
    dev = [
        "--entity-mapping",
        str(DEV / "entity_id_mapping.json"),
        "--entities",
        str(DEV / "entities.jsonl"),
    ]
    hash_ = ["--embedding", "hash"]
    runs = [
        Run("dev-rules-hash", _dev_input, [*dev, "--llm", "none", *hash_]),
        Run("dev-rules-use", _dev_input, [*dev, "--llm", "none"]),
        Run("dev-gold-hash", _dev_input, [*dev, *hash_], _dev_gold),
        Run("dev-gold-use", _dev_input, dev, _dev_gold),
        Run("dev-gold-nosemantic", _dev_input, [*dev, "--no-semantic"], _dev_gold),
        Run(
            "dev-rules-chunks-workers2",
            _dev_input,
            [*dev, "--llm", "none", *hash_, "--workers", "2"],
            config=SMALL_CHUNKS,
        ),
        Run(
            "dev-gold-chunks-inprocess",
            _dev_input,
            [*dev, *hash_, "--workers", "0"],
            _dev_gold,
            SMALL_CHUNKS,
        ),
        Run(
            "dev-gold-chunks-workers2",
            _dev_input,
            [*dev, *hash_, "--workers", "2"],
            _dev_gold,
            SMALL_CHUNKS,
        ),
        Run(
            "dev-gold-packed-chunks-inprocess",  # issue 27: packed requests, any engine
            _dev_input,
            [*dev, *hash_, "--workers", "0", "--llm-pack-tokens", "8000"],
            _dev_gold,
            SMALL_CHUNKS,
        ),
        Run(
            "dev-gold-packed-chunks-workers2",
            _dev_input,
            [*dev, *hash_, "--workers", "2", "--llm-pack-tokens", "8000"],
            _dev_gold,
            SMALL_CHUNKS,
        ),
        Run(
            "dev-gold-chunks-default-engine",  # worker processes, as the run chooses them
            _dev_input,
            [*dev, *hash_],
            _dev_gold,
            SMALL_CHUNKS,
        ),
        Run(
            "dev-gold-chunks-ray",  # Ray tasks on a local Ray (pip install relmerge[ray])
            _dev_input,
            [*dev, *hash_, "--engine", "ray"],
            _dev_gold,
            SMALL_CHUNKS,
        ),
        Run(
            "dev-gold-chunks-workers2-use",
            _dev_input,
            [*dev, "--workers", "2"],
            _dev_gold,
            SMALL_CHUNKS,
        ),
    ]
    for source in SOURCES:
        data = load_real(source)
        labels = (data.gold, data.records)
        runs.append(Run(f"real-{source}-rules", _real_input(source), ["--llm", "none", *hash_]))
        runs.append(Run(f"real-{source}-gold", _real_input(source), hash_, _constant(labels)))
    runs.append(Run(f"real-{REAL[0]}-gold-use", _real_input(REAL[0]), [], _gold_of(REAL[0])))
    return runs


def _constant(labels: Labels) -> Callable[[], Labels]:
    return lambda: labels


def _gold_of(source: str) -> Callable[[], Labels]:
    def labels() -> Labels:
        data = load_real(source)
        return data.gold, data.records

    return labels


def _digest(parts: Iterator[bytes]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()[:24]


def output_digest(out: Path) -> str:
    def parts() -> Iterator[bytes]:
        folder = out / "deduplicated_relations"
        for path in sorted(folder.iterdir()):
            yield path.name.encode()
            yield path.read_bytes()
        for name in ("relation_id_mapping.json", "deduplicated_relation_keys.json"):
            yield name.encode()
            yield (out / name).read_bytes()

    return _digest(parts())


def log_digest(out: Path) -> str:
    def parts() -> Iterator[bytes]:
        for name in ("decisions.jsonl", "clarifications.jsonl"):
            yield name.encode()
            path = out / name
            if not path.exists():
                continue
            for line in path.read_bytes().splitlines():
                if line.strip():
                    item = orjson.loads(line)
                    for key in VARYING_LOG_FIELDS:
                        item.pop(key, None)
                    yield orjson.dumps(item, option=orjson.OPT_SORT_KEYS)

    return _digest(parts())


def result_digest(result: dict[str, Any], served: bool = False) -> str:
    """``served``: the run asked the gold judge, whose port (in ``--llm-base-url``, so in
    the fingerprint) is another one each time."""
    left_out = (*MEASURED_RESULT_KEYS, *(("fingerprint",) if served else ()))
    kept = {k: v for k, v in result.items() if k not in left_out}
    return _digest(iter([orjson.dumps(kept, option=orjson.OPT_SORT_KEYS)]))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    return env


def cli_run(run: Run, scratch: Path) -> tuple[str, float]:
    out = scratch / run.name
    args = [sys.executable, "-m", "relmerge", "run", str(run.input(scratch)), "--output", str(out)]
    args += [*run.args, "-q"]
    if run.config is not None:
        config = scratch / f"{run.name}.toml"
        config.write_text(run.config, encoding="utf-8")
        args += ["--config", str(config)]
    server = None
    if run.gold is not None:
        server = JudgeServer(_judge(run.gold())).__enter__()
        args += ["--llm-base-url", server.base_url, "--llm-model", "gold"]
    started = time.perf_counter()
    try:
        done = subprocess.run(args, env=_env(), capture_output=True, text=True, check=False)
    finally:
        if server is not None:
            server.__exit__()
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{run.name}: exit {done.returncode}\n{done.stdout}\n{done.stderr}")
    result = orjson.loads((out / "deduplicate_relations_result.json").read_bytes())
    digests = f"outputs={output_digest(out)} logs={log_digest(out)}"
    line = (
        f"{digests} result={result_digest(result, server is not None)} "
        f"out={result['output_relation_count']} requests={result['llm_requests']}"
    )
    return line, took


def step_run(scratch: Path, gold: bool) -> tuple[str, float]:
    """The Python step (public API) on the dev set, hash vectors: rules only, or the gold
    judge with a run cache."""
    from relmerge import DeduplicateRelations, DeduplicateRelationsConfig, DictContext, RunCache
    from relmerge.providers.embedding import HashEmbedder
    from relmerge.providers.openai_compat import OpenAICompatibleModel
    from relmerge.stores import MemoryStore

    store = MemoryStore()
    keys = []
    for raw in (DEV / "relations.jsonl").read_bytes().splitlines():
        if raw.strip():
            item = orjson.loads(raw)
            keys.append(f"relations/{item['relation_id']}.json")
            asyncio.run(store.put(keys[-1], orjson.dumps(item)))
    entities = [orjson.loads(x) for x in (DEV / "entities.jsonl").read_bytes().splitlines() if x]
    context = DictContext(
        {"stores.objects": store, "models.embedding": HashEmbedder()},
        {
            "relation_keys": keys,
            "entity_id_mapping": orjson.loads((DEV / "entity_id_mapping.json").read_bytes()),
            "entities": entities,
        },
    )
    cache = RunCache(scratch / "step-cache.sqlite") if gold else None
    step = DeduplicateRelations(DeduplicateRelationsConfig(), cache)
    started = time.perf_counter()
    if gold:
        with JudgeServer(_judge(_dev_gold())) as server:
            model = OpenAICompatibleModel(base_url=server.base_url, model="gold")
            context.components["models.language"] = model
            asyncio.run(step.run(context))
    else:
        asyncio.run(step.run(context))
    took = time.perf_counter() - started
    result = context.artifacts["deduplicate_relations_result"]
    written = sorted((k, v) for k, v in store.objects.items() if not k.startswith("relations/"))

    def parts() -> Iterator[bytes]:
        for key, value in written:
            yield key.encode()
            if key.endswith("decisions.jsonl") or key.endswith("clarifications.jsonl"):
                for text in value.splitlines():
                    item = orjson.loads(text)
                    for name in VARYING_LOG_FIELDS:
                        item.pop(name, None)
                    yield orjson.dumps(item, option=orjson.OPT_SORT_KEYS)
            else:
                yield value
        yield orjson.dumps(context.artifacts["relation_id_mapping"], option=orjson.OPT_SORT_KEYS)
        yield orjson.dumps(context.artifacts["deduplicated_relation_keys"])

    line = (
        f"outputs={_digest(parts())} result={result_digest(dict(result))} "
        f"fingerprint={result['fingerprint'][:24]}"
    )
    return line, took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", type=Path, help="a saved output of this script")
    parser.add_argument("--only", action="append", default=[], help="run only this run")
    parser.add_argument("--times", action="store_true", help="each run's seconds on stderr")
    args = parser.parse_args()
    expected: dict[str, str] = {}
    if args.compare is not None:
        for text in args.compare.read_text(encoding="utf-8").splitlines():
            name, _, rest = text.partition(" ")
            expected[name] = rest
    different = 0
    with tempfile.TemporaryDirectory(prefix="relmerge-same-") as folder:
        scratch = Path(folder)
        jobs: list[tuple[str, Callable[[], tuple[str, float]]]] = [
            (run.name, functools.partial(cli_run, run, scratch)) for run in matrix()
        ]
        jobs.append(("step-dev-rules-hash", functools.partial(step_run, scratch, False)))
        jobs.append(("step-dev-gold-hash-cache", functools.partial(step_run, scratch, True)))
        for name, job in jobs:
            if args.only and name not in args.only:
                continue
            line, took = job()
            if args.times:
                print(f"{name}: {took:.2f} s", file=sys.stderr, flush=True)
            if args.compare is None:
                print(f"{name} {line}", flush=True)
                continue
            want = expected.get(name)
            if want == line:
                print(f"{name} ok", flush=True)
                continue
            different += 1
            which = [
                part.split("=")[0]
                for part, old in zip(line.split(), (want or "").split() or [""] * 9, strict=False)
                if part != old
            ]
            print(f"{name} DIFFERENT ({', '.join(which) or 'missing'})\n  was {want}\n  now {line}")
    if different:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
