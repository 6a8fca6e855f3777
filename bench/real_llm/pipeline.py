"""The whole pipeline with a real small model, per response-format mode.

    bash bench/real_llm/setup.sh
    .venv/bin/python bench/real_llm/pipeline.py [--modes json_object none] [--blocks N]
        [--canaries 0 0.05] [--canary-min 10]

Starts the local llama.cpp server of ``setup.sh`` (Qwen2.5-Coder-1.5B-Instruct, GGUF), then
runs relmerge's step over the dev set (``../shared/data/dev``, with its entity mapping and
profiles; or the records of ``--blocks`` multi-record blocks drawn with ``--seed``) through
:class:`relmerge.providers.openai_compat.OpenAICompatibleModel` in each mode, and once with
``--llm none`` for comparison. Every request the model gets is recorded (task, seconds,
whether its answer passed relmerge's own validation against that request). Prints per
mode: requests by task, the invalid-answer rate of ``relation_cluster``,
``relation_cluster_many`` (packed: every block's part valid) and ``relation_judge``
answers, seconds per request, pair P / R / F1 and hard-negative merges
against ``--llm none``, and how many of the model's merges were right; the last line is
one JSON object with every figure (also written to ``.cache/pipeline-<stamp>.json``).

Each mode runs once per ``--canaries`` share: the canary tally the run measured (right of
answered, distrusted or not) is printed beside its figures, so the rows with and without
canaries show what the canaries changed. When the llama.cpp server dies under a run (it
exits without a word), the bench says so, with its exit code and log, and exits 4.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from judge_pairs import CACHE, DEFAULT_MODEL, DEFAULT_PYTHON, MODEL_ALIAS, start_server, wait_ready

from labelled import DEV, DOMAINS, Labelled, load_dev, pair_counts
from relmerge import DeduplicateRelations, DeduplicateRelationsConfig, DictContext
from relmerge.errors import InvalidAnswerError
from relmerge.model import EntityContext
from relmerge.prompts import cluster_many, cluster_relations, judge_pair, merge_relations
from relmerge.providers.base import LLMRequest, LLMResult
from relmerge.providers.embedding import CachedEmbedder, EmbeddingModel
from relmerge.providers.fake import request_records
from relmerge.providers.openai_compat import OpenAICompatibleModel
from relmerge.providers.use_embed import UseEmbedder
from relmerge.stores import MemoryStore


def dev_set(blocks: int, seed: int) -> Labelled:
    """All dev domains as one set, or the records of ``blocks`` sampled blocks."""
    parts = [load_dev(domain) for domain in DOMAINS]
    data = Labelled(
        "dev",
        [r for part in parts for r in part.records],
        {k: v for part in parts for k, v in part.gold.items()},
        parts[0].mapping,
        parts[0].entities,
        parts[0].hard_negatives,
    )
    if blocks:
        chosen = random.Random(seed).sample(data.blocks(), blocks)
        keep = {relation_id for block in chosen for relation_id in block}
        data.records = [r for r in data.records if r["relation_id"] in keep]
    return data


def valid(request: LLMRequest, result: LLMResult) -> bool:
    """Whether the answer passes relmerge's validation of this request."""
    if result.parsed is None or getattr(result, "truncated", False):
        return False
    records = request_records(request)
    try:
        if request.task == "relation_cluster":
            cluster_relations.validate_answer(result.parsed, records)
        elif request.task == "relation_judge":
            existing = [str(r["relation_id"]) for r in records if r.get("role") == "existing"]
            judge_pair.validate_answer(result.parsed, existing)
        elif request.task == cluster_many.TASK:  # valid: every block's part is
            nobody = (EntityContext("", ""), EntityContext("", ""))
            parts = [cluster_many.Part(block["records"], nobody, {}) for block in records]
            outcomes = cluster_many.validate_answer(result.parsed, parts)
            return not any(isinstance(outcome, InvalidAnswerError) for outcome in outcomes)
        else:
            merge_relations.validate_answer(result.parsed, [])
    except (InvalidAnswerError, KeyError, TypeError, ValueError):
        return False
    return True


@dataclass
class Recorder:
    """The provider, with a note of every request: task, seconds, valid or not."""

    inner: OpenAICompatibleModel
    name: str = MODEL_ALIAS
    available: bool = True
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def cache_identity(self) -> dict[str, Any]:
        return self.inner.cache_identity

    async def invoke(self, request: LLMRequest) -> LLMResult:
        start = time.perf_counter()
        result = await self.inner.invoke(request)
        self.rows.append(
            {
                "task": request.task,
                "records": len(request_records(request)),
                "seconds": round(time.perf_counter() - start, 2),
                "valid": valid(request, result),
                "completion_tokens": result.usage.completion_tokens,
                "text": result.text[:2000],
            }
        )
        return result


async def run(
    data: Labelled, llm: Any, embedder: EmbeddingModel, config: DeduplicateRelationsConfig
) -> tuple[dict[str, str], dict[str, Any], list[dict[str, Any]]]:
    store = MemoryStore()
    keys = []
    for record in data.records:
        key = f"relations/{record['relation_id']}.json"
        store.objects[key] = json.dumps(record).encode()
        keys.append(key)
    context = DictContext(
        components={"stores.objects": store, "models.language": llm, "models.embedding": embedder},
        artifacts={
            "relation_keys": keys,
            "entity_id_mapping": data.mapping,
            "entities": data.entities,
        },
    )
    output = await DeduplicateRelations(config).run(context)
    (log,) = [key for key in output.log_keys if key.endswith("/decisions.jsonl")]
    decisions = [json.loads(line) for line in store.objects[log].splitlines()]
    return output.relation_id_mapping, output.result, decisions


def llm_merges(data: Labelled, decisions: list[dict[str, Any]]) -> dict[str, int]:
    """Pairs inside the model's merge decisions that were applied whole: same fact (right)
    or not (wrong). A partial merge (a hard keep refused part of it) is counted apart."""
    right = wrong = partial = 0
    for decision in decisions:
        partial += decision["tier"] == "llm" and decision["verdict"] == "partial_merge"
        if decision["tier"] == "llm" and decision["verdict"] == "merge":
            for a, b in combinations(decision["member_ids"], 2):
                if frozenset((a, b)) in data.doubtful:
                    continue
                if data.gold[a] == data.gold[b]:
                    right += 1
                else:
                    wrong += 1
    return {"pairs_right": right, "pairs_wrong": wrong, "partial_merges": partial}


def figures(data: Labelled, mapping: dict[str, str], result: dict[str, Any]) -> dict[str, Any]:
    counts = pair_counts(data, mapping)
    return {
        "precision": round(counts.precision, 4),
        "recall": round(counts.recall, 4),
        "f1": round(counts.f1, 4),
        "hard_negative_merges": len(counts.hard_negative_merges),
        "llm_requests": result["llm_requests"],
        "llm_invalid_answers": result.get("llm_invalid_answers", 0),
        "failed_groups": result["failed_group_count"],
        "clarifications": result.get("clarification_count"),
        "seconds": result["seconds"]["total"],
    }


def by_task(rows: list[dict[str, Any]]) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for task in sorted({row["task"] for row in rows}):
        chosen = [row for row in rows if row["task"] == task]
        invalid = sum(not row["valid"] for row in chosen)
        report[task] = {
            "requests": len(chosen),
            "invalid": invalid,
            "invalid_rate": round(invalid / len(chosen), 4),
            "seconds_per_request": round(sum(r["seconds"] for r in chosen) / len(chosen), 2),
            "completion_tokens_mean": round(
                sum(r["completion_tokens"] for r in chosen) / len(chosen), 1
            ),
        }
    return report


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    data = dev_set(args.blocks, args.seed)
    embedder = CachedEmbedder(UseEmbedder())
    config = DeduplicateRelationsConfig(concurrency=1)
    mapping, result, _ = await run(data, None, embedder, config)
    report: dict[str, Any] = {
        "records": len(data.records),
        "blocks": len(data.blocks()),
        "rules only": figures(data, mapping, result),
    }
    for mode in args.modes:
        for rate in args.canaries:
            label = f"LLM, {mode}, canaries {rate:g}"
            canaries = {"canaries": rate, "canary_min": args.canary_min}
            model = OpenAICompatibleModel(
                base_url=args.base_url,
                model=MODEL_ALIAS,
                response_format=mode,
                timeout=args.timeout,
                max_retries=1,
            )
            recorder = Recorder(model)
            try:
                mapping, result, decisions = await run(
                    data, recorder, embedder, config.model_copy(update=canaries)
                )
            except Exception as error:
                died(args, error)
                raise
            finally:
                await model.aclose()
            died(args, None)
            report[label] = {
                **figures(data, mapping, result),
                "by_task": by_task(recorder.rows),
                "llm_merges": llm_merges(data, decisions),
                "canaries": result["canaries"],
            }
            (CACHE / f"pipeline-{mode}-{rate:g}-{args.stamp}.jsonl").write_text(
                "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in recorder.rows)
            )
            print(f"{label}: {json.dumps(report[label])}", flush=True)
    return report


def died(args: argparse.Namespace, error: BaseException | None) -> None:
    """Say so, plainly, when the llama.cpp server died under the run (it exits without a
    word: a native build's general protection fault in libggml-cpu looks like this)."""
    process = getattr(args, "process", None)
    if process is None or process.poll() is None:
        return
    code = process.returncode
    signal_note = f" (signal {-code})" if code < 0 else ""
    print(
        f"!! the llama.cpp server died during the run: exit code {code}{signal_note}"
        + (f"; the run failed with {type(error).__name__}: {error}" if error else "")
        + f". Its log: {args.server_log}. A build with -DGGML_NATIVE=ON died with a general "
        "protection fault in libggml-cpu at the first completion on this machine kind "
        "(see dmesg); setup.sh builds with -DGGML_NATIVE=OFF by default: remove "
        "bench/real_llm/.cache/venv and run it again.",
        file=sys.stderr,
        flush=True,
    )
    raise SystemExit(4)


def show(report: dict[str, Any]) -> None:
    print(f"\n{report['records']} records, {report['blocks']} multi-record blocks")
    print(
        f"{'run':<34}{'P':>7}{'R':>7}{'F1':>7}{'HN':>4}{'requests':>10}{'invalid':>9}"
        f"{'s/req':>7}  canaries"
    )
    for name in [key for key in report if key not in ("records", "blocks")]:
        row = report[name]
        tasks = row.get("by_task", {})
        seconds = [t["seconds_per_request"] for t in tasks.values()]
        print(
            f"{name:<34}{row['precision']:>7.3f}{row['recall']:>7.3f}{row['f1']:>7.3f}"
            f"{row['hard_negative_merges']:>4}{row['llm_requests']:>10}"
            f"{row['llm_invalid_answers']:>9}{(max(seconds) if seconds else 0):>7.1f}"
            f"  {canary_note(row.get('canaries'))}"
        )
        for task, figures_ in tasks.items():
            print(f"    {task:<18} {json.dumps(figures_)}")


def canary_note(canaries: dict[str, Any] | None) -> str:
    if not canaries or not canaries["asked"]:
        return "-"
    note = f"{canaries['right']}/{canaries['answered']} right"
    return note + (", distrusted: merges not applied" if canaries["distrusted"] else "")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--modes", nargs="*", default=["json_object", "none"], help="response formats to run"
    )
    parser.add_argument("--blocks", type=int, default=0, help="sample of blocks; 0 = all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--port", type=int, default=8791)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--python", type=Path, default=DEFAULT_PYTHON)
    parser.add_argument("--chat-format", default="chatml")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--base-url", default=None, help="an already-running server")
    parser.add_argument(
        "--canaries", type=float, nargs="+", default=[0.0, 0.05], help="canary shares to run"
    )
    parser.add_argument("--canary-min", type=int, default=10)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    args.data = DEV
    args.stamp = time.strftime("%Y%m%d-%H%M%S")
    CACHE.mkdir(parents=True, exist_ok=True)
    process = None
    if args.base_url is None and args.modes:
        args.base_url = f"http://127.0.0.1:{args.port}/v1"
        args.server_log = CACHE / f"server-{args.stamp}.log"
        process = start_server(args, args.server_log)
    args.process = process
    try:
        if args.modes:
            wait_ready(args.base_url, process, timeout=300)
        report = asyncio.run(main_async(args))
    finally:
        if process is not None:
            process.terminate()
            process.wait(timeout=30)
    show(report)
    (CACHE / f"pipeline-{args.stamp}.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
