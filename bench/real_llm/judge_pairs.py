"""Real-LLM measurement of the pairwise judge prompt (``relation_judge``).

Starts a local llama.cpp server (llama-cpp-python, installed with the model by
``bench/real_llm/setup.sh``), then asks relmerge's own judge code
(:func:`relmerge.decide.ask.ask_judge` through
:class:`relmerge.providers.openai_compat.OpenAICompatibleModel`) about a stratified subset
of ``<repo>/../shared/data/dev/pairs_hard.jsonl`` and compares the verdicts with the labels.

    bash bench/real_llm/setup.sh
    .venv/bin/python bench/real_llm/judge_pairs.py --limit 30

One answer takes a few seconds on 2 cores. Per-pair details (prompt-ready records,
verdict, reason, raw texts) go to ``bench/real_llm/.cache/results-<stamp>.jsonl``; the last
printed line is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from relmerge import DeduplicateRelationsConfig
from relmerge.decide.ask import ask_judge
from relmerge.errors import ProviderError
from relmerge.model import EntityContext
from relmerge.prompts.base import truncate
from relmerge.providers.base import LLMRequest, LLMResult
from relmerge.providers.openai_compat import OpenAICompatibleModel
from relmerge.stages.llm_merge import GroupFailed

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CACHE = HERE / ".cache"
DEFAULT_DATA = REPO.parent / "shared" / "data" / "dev"
DEFAULT_MODEL = CACHE / "qwen2.5-coder-1.5b-instruct.gguf"
DEFAULT_PYTHON = CACHE / "venv" / "bin" / "python"
MODEL_ALIAS = "qwen2.5-coder-1.5b-instruct"
_TAG = re.compile(r"^\[([a-z0-9_]+)\]")


# --------------------------------------------------------------------------- data


@dataclass
class Pair:
    index: int  # line number in pairs_hard.jsonl, from 1
    label: str
    why: str
    category: str
    existing: dict[str, Any]
    candidate: dict[str, Any]


def load_pairs(path: Path) -> list[Pair]:
    pairs = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        item = orjson.loads(line)
        why = str(item.get("why", ""))
        match = _TAG.match(why)
        pairs.append(
            Pair(
                number,
                item["label"],
                why,
                match.group(1) if match else "untagged",
                item["existing"],
                item["candidate"],
            )
        )
    return pairs


def stratified(pairs: list[Pair], limit: int, seed: int) -> list[Pair]:
    """Half merge, half keep_both; within a label round-robin over the ``why`` categories
    (each shuffled with a fixed seed), so small limits still cover many kinds of pair.
    The result alternates labels so that an interrupted run stays balanced."""
    if limit <= 0 or limit >= len(pairs):
        limit = len(pairs)
    rng = random.Random(seed)
    ordered: dict[str, list[Pair]] = {}
    for label in ("merge", "keep_both"):
        by_category: dict[str, list[Pair]] = defaultdict(list)
        for pair in pairs:
            if pair.label == label:
                by_category[pair.category].append(pair)
        queues = []
        for category in sorted(by_category):
            items = by_category[category]
            rng.shuffle(items)
            queues.append(items)
        flat: list[Pair] = []
        while any(queues):
            for queue in queues:
                if queue:
                    flat.append(queue.pop(0))
        ordered[label] = flat
    want = {"merge": limit // 2, "keep_both": limit - limit // 2}
    for label, other in (("merge", "keep_both"), ("keep_both", "merge")):
        short = want[label] - len(ordered[label])
        if short > 0:  # not enough of one label: fill with the other
            want[label] -= short
            want[other] += short
    merges, keeps = ordered["merge"][: want["merge"]], ordered["keep_both"][: want["keep_both"]]
    chosen: list[Pair] = []
    for i in range(max(len(merges), len(keeps))):
        chosen += [p[i] for p in (keeps, merges) if i < len(p)]
    return chosen


def load_entities(data: Path) -> tuple[dict[str, str], dict[str, EntityContext]]:
    mapping: dict[str, str] = orjson.loads((data / "entity_id_mapping.json").read_bytes())
    entities: dict[str, EntityContext] = {}
    for line in (data / "entities.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        item = orjson.loads(line)
        entities[item["entity_id"]] = EntityContext(
            item["entity_id"], item["name"], item.get("profile") or None, item.get("type") or None
        )
    return mapping, entities


def prompt_inputs(
    pair: Pair,
    mapping: dict[str, str],
    entities: dict[str, EntityContext],
    config: DeduplicateRelationsConfig,
) -> tuple[dict[str, Any], dict[str, Any], tuple[EntityContext, EntityContext], bool]:
    """The records and entity pair as the semantic stage builds them (``block._record``).

    Entity A is the existing record's canonical source, B its canonical target. Returns
    ``same_endpoints``: False for pairs whose candidate links other entities (the
    pipeline never sends those to the judge; the records' entity names show it)."""

    def canon(entity_id: str) -> str:
        return mapping.get(entity_id, entity_id)

    ex = pair.existing
    a, b = canon(ex["source_entity_id"]), canon(ex["target_entity_id"])

    def record(raw: dict[str, Any]) -> dict[str, Any]:
        src, tgt = canon(raw["source_entity_id"]), canon(raw["target_entity_id"])
        forward = (src, tgt) == (a, b) or ((src, tgt) != (b, a) and (src == a or tgt == b))
        return {
            "relation_id": raw["relation_id"],
            "source_entity_name": raw["source_entity_name"],
            "target_entity_name": raw["target_entity_name"],
            "direction": "A->B" if forward else "B->A",
            "type": raw["type"],
            "name": raw["name"],
            "description": truncate(raw["description"], config.prompt_description_chars),
            "attributes": raw.get("attributes") or {},
        }

    def context(entity_id: str, name: str) -> EntityContext:
        return entities.get(entity_id) or EntityContext(entity_id, name)

    cand = pair.candidate
    same = {canon(cand["source_entity_id"]), canon(cand["target_entity_id"])} == {a, b}
    pair_entities = (
        context(a, ex["source_entity_name"]),
        context(b, ex["target_entity_name"]),
    )
    return record(ex), record(cand), pair_entities, same


# --------------------------------------------------------------------------- server


def wait_ready(base: str, process: subprocess.Popen[bytes] | None, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise SystemExit(f"llama.cpp server exited with code {process.returncode}")
        try:
            with urllib.request.urlopen(f"{base}/models", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1.0)
    raise SystemExit(f"llama.cpp server at {base} not ready after {timeout:.0f} s")


def start_server(args: argparse.Namespace, log_path: Path) -> subprocess.Popen[bytes]:
    if not Path(args.model).is_file() or not Path(args.python).is_file():
        raise SystemExit(
            f"missing {args.model} or {args.python}: run bash bench/real_llm/setup.sh first"
        )
    command = [
        str(args.python),
        "-m",
        "llama_cpp.server",
        "--model",
        str(args.model),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(args.port),
        "--n_ctx",
        str(args.n_ctx),
        "--n_threads",
        str(args.threads),
        "--n_threads_batch",
        str(args.threads),
        "--verbose",
        "False",
    ]
    if args.chat_format != "auto":  # auto: the chat template stored in the GGUF
        command += ["--chat_format", args.chat_format]
    print("$ " + " ".join(command), flush=True)
    log = log_path.open("wb")
    # OpenMP threads that spin-wait for a busy core stall llama.cpp; let them sleep.
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)


# --------------------------------------------------------------------------- judging


@dataclass
class CountingModel:
    """Wraps the provider to count the requests ``ask_judge`` makes (invalid answers are
    retried with feedback inside ``ask_validated``) and keep the raw texts."""

    inner: OpenAICompatibleModel
    name: str = MODEL_ALIAS
    available: bool = True
    calls: int = 0
    texts: list[str] = field(default_factory=list)

    async def invoke(self, request: LLMRequest) -> LLMResult:
        self.calls += 1
        result = await self.inner.invoke(request)
        self.texts.append(result.text)
        return result


@dataclass
class Row:
    pair: Pair
    same_endpoints: bool
    verdict: str  # merge / keep_both / unsure / invalid / error
    reason: str
    calls: int
    seconds: float
    texts: list[str]
    prompt_tokens: int = 0
    completion_tokens: int = 0


def domain(pair: Pair) -> str:
    chunk = str(pair.existing.get("chunk_id", ""))
    return next((d for d in ("geo", "novel", "tech") if f"_{d}_" in chunk), "?")


def summary(pair: Pair) -> str:
    e, c = pair.existing, pair.candidate
    return (
        f"{e['source_entity_name']} -[{e['name']}]-> {e['target_entity_name']}  vs  "
        f"{c['source_entity_name']} -[{c['name']}]-> {c['target_entity_name']}"
    )


async def judge_all(args: argparse.Namespace, pairs: list[Pair]) -> list[Row]:
    config = DeduplicateRelationsConfig()
    mapping, entities = load_entities(args.data)
    provider = OpenAICompatibleModel(
        base_url=args.base_url,
        model=MODEL_ALIAS,
        response_format="json_object",
        timeout=args.timeout,
        max_retries=1,
    )
    rows: list[Row] = []
    try:
        for number, pair in enumerate(pairs, start=1):
            existing, candidate, pair_entities, same = prompt_inputs(
                pair, mapping, entities, config
            )
            llm = CountingModel(provider)
            started = time.perf_counter()
            prompt_tokens = completion_tokens = 0
            verdict: str
            try:
                outcome, result = await ask_judge(llm, [existing], candidate, pair_entities, config)
                verdict, reason = outcome.verdict, outcome.reason
                prompt_tokens = result.usage.prompt_tokens
                completion_tokens = result.usage.completion_tokens
            except GroupFailed as failure:
                verdict, reason = "invalid", failure.reason
            except ProviderError as error:
                verdict, reason = "error", str(error)
            seconds = time.perf_counter() - started
            row = Row(
                pair,
                same,
                verdict,
                reason,
                llm.calls,
                seconds,
                llm.texts,
                prompt_tokens,
                completion_tokens,
            )
            rows.append(row)
            mark = "ok " if verdict == pair.label else "XX "
            retries = f" calls={llm.calls}" if llm.calls != 1 else ""
            print(
                f"{mark}{number:3d}/{len(pairs)} #{pair.index:<3d} {domain(pair):5s} "
                f"label={pair.label:9s} verdict={verdict:9s} {seconds:5.1f}s{retries} "
                f"[{pair.category}]{'' if same else ' (other endpoints)'}\n"
                f"      {summary(pair)}\n      reason: {reason}",
                flush=True,
            )
    finally:
        await provider.aclose()
    return rows


def figures(rows: list[Row]) -> dict[str, Any]:
    n = len(rows)
    tp = sum(r.verdict == "merge" and r.pair.label == "merge" for r in rows)
    predicted = sum(r.verdict == "merge" for r in rows)
    actual = sum(r.pair.label == "merge" for r in rows)
    correct = sum(r.verdict == r.pair.label for r in rows)
    decided = [r for r in rows if r.verdict in ("merge", "keep_both")]
    calls = sum(r.calls for r in rows)
    seconds = sum(r.seconds for r in rows)
    answered = [r for r in rows if r.verdict not in ("error",)]
    return {
        "pairs": n,
        "merge_pairs": actual,
        "keep_both_pairs": n - actual,
        "accuracy": round(correct / n, 4) if n else None,
        "accuracy_decided": (
            round(sum(r.verdict == r.pair.label for r in decided) / len(decided), 4)
            if decided
            else None
        ),
        "merge_precision": round(tp / predicted, 4) if predicted else None,
        "merge_recall": round(tp / actual, 4) if actual else None,
        "predicted_merge": predicted,
        "unsure_share": round(sum(r.verdict == "unsure" for r in rows) / n, 4) if n else None,
        "invalid_answers": sum(r.verdict == "invalid" for r in rows),
        "pairs_needing_retry": sum(r.calls > 1 for r in answered),
        "errors": sum(r.verdict == "error" for r in rows),
        "llm_requests": calls,
        "mean_seconds_per_pair": round(seconds / n, 2) if n else None,
        "mean_seconds_per_request": round(seconds / calls, 2) if calls else None,
        "mean_prompt_tokens": (
            round(sum(r.prompt_tokens for r in decided) / len(decided)) if decided else None
        ),
    }


def report(rows: list[Row], args: argparse.Namespace, results_path: Path) -> None:
    with results_path.open("wb") as out:
        for r in rows:
            out.write(
                orjson.dumps(
                    {
                        "line": r.pair.index,
                        "label": r.pair.label,
                        "verdict": r.verdict,
                        "reason": r.reason,
                        "category": r.pair.category,
                        "domain": domain(r.pair),
                        "same_endpoints": r.same_endpoints,
                        "why": r.pair.why,
                        "summary": summary(r.pair),
                        "calls": r.calls,
                        "seconds": round(r.seconds, 2),
                        "texts": r.texts,
                    }
                )
                + b"\n"
            )
    stats = figures(rows)
    by_category: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        key = f"{r.pair.label}/{r.pair.category}"
        by_category[key][0] += r.verdict == r.pair.label
        by_category[key][1] += 1
    print("\nper label/category (correct/total):")
    for key in sorted(by_category):
        good, total = by_category[key]
        print(f"  {key:60s} {good}/{total}")
    print(f"\nresults: {results_path}")
    print(f"pairs:               {stats['pairs']} ({stats['merge_pairs']} merge)")
    print(f"accuracy:            {stats['accuracy']} (decided only: {stats['accuracy_decided']})")
    print(f"merge precision:     {stats['merge_precision']} ({stats['predicted_merge']} said)")
    print(f"merge recall:        {stats['merge_recall']}")
    print(f"unsure share:        {stats['unsure_share']}")
    print(
        f"invalid answers:     {stats['invalid_answers']} "
        f"(pairs needing a retry: {stats['pairs_needing_retry']}, errors: {stats['errors']})"
    )
    print(
        f"seconds per answer:  {stats['mean_seconds_per_pair']} per pair, "
        f"{stats['mean_seconds_per_request']} per request ({stats['llm_requests']} requests)"
    )
    stats.update(
        model=Path(args.model).name,
        chat_format=args.chat_format,
        limit=args.limit,
        seed=args.seed,
    )
    print(orjson.dumps(stats).decode())


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=30, help="pairs to judge; 0 = all")
    parser.add_argument("--port", type=int, default=8791)
    parser.add_argument("--seed", type=int, default=0, help="seed of the stratified subset")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--python", type=Path, default=DEFAULT_PYTHON)
    parser.add_argument(
        "--chat-format",
        default="chatml",
        help="llama-cpp-python chat format (Qwen2.5 speaks ChatML); auto = the GGUF's template",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="llama.cpp threads; 1 is fastest on this 2-core machine while anything else "
        "runs (2 threads spin-wait against other processes: 5-20x slower)",
    )
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per request")
    parser.add_argument(
        "--base-url",
        default=None,
        help="use an already-running OpenAI-compatible server instead of starting one",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    pairs = stratified(load_pairs(args.data / "pairs_hard.jsonl"), args.limit, args.seed)
    CACHE.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    process = None
    if args.base_url is None:
        args.base_url = f"http://127.0.0.1:{args.port}/v1"
        process = start_server(args, CACHE / f"server-{stamp}.log")
    try:
        started = time.monotonic()
        wait_ready(args.base_url, process, timeout=300)
        print(f"server ready after {time.monotonic() - started:.1f} s; {len(pairs)} pairs")
        rows = asyncio.run(judge_all(args, pairs))
    finally:
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    report(rows, args, CACHE / f"results-{stamp}.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
