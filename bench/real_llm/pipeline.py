"""The whole pipeline with a real small model, per response-format mode.

    bash bench/real_llm/setup.sh
    .venv/bin/python bench/real_llm/pipeline.py [--set dev|real|held-out-kinds]
        [--modes json_object none] [--blocks N] [--hard-blocks H] [--seed S]
        [--canaries 0 0.05] [--canary-tokens 0.1] [--pack-tokens 0 8000]

Starts the local llama.cpp server of ``setup.sh`` (Qwen2.5-Coder-1.5B-Instruct, GGUF), then
runs relmerge's step over a labelled set (all of it, or the records of ``--blocks``
multi-record blocks drawn with ``--seed``, of which ``--hard-blocks`` are drawn from the
blocks holding a documented hard-negative pair) through
:class:`relmerge.providers.openai_compat.OpenAICompatibleModel` in each mode, and once with
``--llm none`` for comparison (``--modes`` with no value: only that run, no server).
``--set`` chooses the set:

* ``dev`` (default): the dev set (``../shared/data/dev``, all three domains, with its entity
  mapping, profiles and hard negatives);
* ``real``: the five labelled real graphs of ``bench/labelled.py``, each kept to its
  labelled blocks (every member labelled), as one set with their doubtful pairs; no entity
  mapping or profiles and no documented hard negatives, so ``--hard-blocks`` must be 0
  (ids are checked not to collide across the graphs);
* ``held-out-kinds``: the synthetic held-out set of ``tests/data/held_out_kinds`` (every
  block holds a documented hard-negative pair, so ``--hard-blocks`` below ``--blocks`` has
  no blocks to draw the rest from).

The report names its set. Every request the model gets is recorded (task, seconds,
whether its answer passed relmerge's own validation against that request). Prints per
mode: requests by task, the invalid-answer rate of ``relation_cluster``,
``relation_cluster_many`` (packed: every block's part valid) and ``relation_judge``
answers, seconds per request, pair P / R / F1 and hard-negative merges
against ``--llm none``, and how many of the model's merges were right; the last line is
one JSON object with every figure (also written to ``.cache/pipeline-<stamp>.json``).

Each mode runs once per ``--pack-tokens`` budget (``llm_pack_tokens``; 0: one request per
question) and ``--canaries`` share: the canary tally the run measured (right of answered,
distrusted or not) is printed beside its figures, and each run with canaries is compared
with the same run without them (pairs merged in one and not the other, right or wrong), so
the rows show what the canaries changed (each run's id mapping is saved to
``.cache/mapping-*.json``; ``--changes OFF ON`` compares two runs made apart). Per run:
prompt and completion tokens from the server's ``usage``, model seconds, and seconds per
pair left to the model (the pairs the ``--llm none`` run leaves undecided); for packed
requests, the share of ``relation_cluster_many`` answers invalid as a whole and of their
blocks' parts. When the llama.cpp server dies under a run (it exits without a word), the
bench says so, with its exit code and log, and exits 4.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from judge_pairs import CACHE, DEFAULT_MODEL, DEFAULT_PYTHON, MODEL_ALIAS, start_server, wait_ready

from labelled import DEV, DOMAINS, Labelled, load_dev, load_held_out_kinds, load_real, pair_counts
from real_sources import SOURCES
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

SETS = ("dev", "real", "held-out-kinds")


def dev_data() -> Labelled:
    """All dev domains as one set, with the dev entity mapping, profiles and hard negatives."""
    parts = [load_dev(domain) for domain in DOMAINS]
    return Labelled(
        "dev",
        [r for part in parts for r in part.records],
        {k: v for part in parts for k, v in part.gold.items()},
        parts[0].mapping,
        parts[0].entities,
        parts[0].hard_negatives,
    )


def real_data() -> Labelled:
    """The five labelled real graphs as one set, each kept to the records of its labelled
    blocks (every member labelled; the rest of a graph is unlabelled singletons). No entity
    mapping or profiles, no documented hard negatives; doubtful pairs unioned. Relation
    and entity ids are checked not to collide across the graphs (a shared entity id would
    join two graphs' blocks)."""
    records: list[dict[str, Any]] = []
    gold: dict[str, str] = {}
    doubtful: set[frozenset[str]] = set()
    owner: dict[str, str] = {}  # relation or entity id -> its source
    for source in SOURCES:
        part = load_real(source)
        keep = {
            relation_id
            for block in part.blocks()
            if not any(part.gold[relation_id].startswith("single:") for relation_id in block)
            for relation_id in block
        }
        kept = [r for r in part.records if r["relation_id"] in keep]
        ids = {r["relation_id"] for r in kept}
        ids |= {r[end] for r in kept for end in ("source_entity_id", "target_entity_id")}
        clashes = sorted(i for i in ids if owner.get(i, source) != source)
        if clashes:
            raise ValueError(f"ids of {source} also in {owner[clashes[0]]}: {clashes[:5]}")
        owner |= dict.fromkeys(ids, source)
        records += kept
        gold |= {relation_id: part.gold[relation_id] for relation_id in keep}
        doubtful |= {pair for pair in part.doubtful if pair <= keep}
    return Labelled("real", records, gold, doubtful=doubtful)


def load_set(name: str) -> Labelled:
    """The whole labelled set ``--set`` names."""
    if name == "real":
        return real_data()
    if name == "held-out-kinds":
        return load_held_out_kinds()
    return dev_data()


def sample(data: Labelled, blocks: int, seed: int, hard_blocks: int = 0) -> Labelled:
    """``data`` kept to the records of ``blocks`` sampled blocks (0: all of it), of which
    ``hard_blocks`` hold a documented hard-negative pair (0: drawn from all blocks alike)."""
    if hard_blocks and not data.hard_negatives:
        raise SystemExit(
            f"--hard-blocks {hard_blocks}: the {data.name} set has no documented hard "
            "negatives; give --hard-blocks 0"
        )
    if blocks and hard_blocks:
        rng = random.Random(seed)
        hard = [block for block in data.blocks() if holds_hard_negative(data, block)]
        rest = [block for block in data.blocks() if not holds_hard_negative(data, block)]
        if hard_blocks > min(blocks, len(hard)) or blocks - hard_blocks > len(rest):
            raise SystemExit(
                f"--blocks {blocks} --hard-blocks {hard_blocks}: the {data.name} set has "
                f"{len(hard)} blocks with a documented hard-negative pair and {len(rest)} "
                "without"
            )
        chosen = rng.sample(hard, hard_blocks) + rng.sample(rest, blocks - hard_blocks)
        keep = {relation_id for block in chosen for relation_id in block}
        data.records = [r for r in data.records if r["relation_id"] in keep]
    elif blocks:
        if blocks > len(data.blocks()):
            raise SystemExit(f"--blocks {blocks}: the {data.name} set has {len(data.blocks())}")
        chosen = random.Random(seed).sample(data.blocks(), blocks)
        keep = {relation_id for block in chosen for relation_id in block}
        data.records = [r for r in data.records if r["relation_id"] in keep]
    return data


def holds_hard_negative(data: Labelled, block: list[str]) -> bool:
    return any(
        frozenset((data.gold[a], data.gold[b])) in data.hard_negatives
        for a, b in combinations(block, 2)
    )


def packed_parts(request: LLMRequest) -> list[cluster_many.Part]:
    """The blocks of a ``relation_cluster_many`` request, as its validation reads them."""
    blocks = request_records(request)  # the first json block: the list of blocks
    nobody = EntityContext("", "")
    return [cluster_many.Part(block["records"], (nobody, nobody), {}) for block in blocks]


def valid(request: LLMRequest, result: LLMResult) -> tuple[bool, int, list[str]]:
    """Whether the answer passes relmerge's validation of this request, with (for packed
    requests) its blocks' parts: how many, and why each invalid one is."""
    if result.parsed is None or getattr(result, "truncated", False):
        parts = len(request_records(request)) if request.task == cluster_many.TASK else 0
        return False, parts, ["no JSON answer"] * parts
    if request.task == cluster_many.TASK:
        parts_ = packed_parts(request)
        try:
            read = cluster_many.validate_answer(result.parsed, parts_)
        except (InvalidAnswerError, KeyError, TypeError, ValueError, AttributeError) as error:
            return False, len(parts_), [str(error)[:200]] * len(parts_)
        bad = [str(item)[:200] for item in read if isinstance(item, InvalidAnswerError)]
        return True, len(parts_), bad
    return valid_single(request, result), 0, []


def valid_single(request: LLMRequest, result: LLMResult) -> bool:
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
    """The provider, with a note of every request: task, seconds, valid or not (also
    appended to ``log`` as it comes, so a run cut short still shows its requests)."""

    inner: OpenAICompatibleModel
    log: Path | None = None
    name: str = MODEL_ALIAS
    available: bool = True
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def cache_identity(self) -> dict[str, Any]:
        return self.inner.cache_identity

    async def invoke(self, request: LLMRequest) -> LLMResult:
        start = time.perf_counter()
        try:
            result = await self.inner.invoke(request)
        except Exception as error:  # a timeout or transport failure: noted, then raised
            self.note(
                {
                    "task": request.task,
                    "records": len(request_records(request)),
                    "seconds": round(time.perf_counter() - start, 2),
                    "error": f"{type(error).__name__}: {error}"[:300],
                }
            )
            raise
        ok, parts, why = valid(request, result)
        row = {
            "task": request.task,
            "records": len(request_records(request)),
            "seconds": round(time.perf_counter() - start, 2),
            "valid": ok,
            "parts": parts,
            "invalid_parts": len(why),
            "invalid_part_reasons": why,
            "prompt_tokens": result.usage.prompt_tokens,
            "completion_tokens": result.usage.completion_tokens,
            "text": result.text[:2000],
        }
        self.note(row)
        return result

    def note(self, row: dict[str, Any]) -> None:
        if "error" not in row:
            self.rows.append(row)
        if self.log is not None:
            with self.log.open("a", encoding="utf-8") as sink:
                sink.write(json.dumps(row, ensure_ascii=False) + "\n")


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
        "prompt_tokens": result["cost"]["prompt_tokens"],
        "completion_tokens": result["cost"]["completion_tokens"],
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
            "prompt_tokens_mean": round(sum(r["prompt_tokens"] for r in chosen) / len(chosen), 1),
            "completion_tokens_mean": round(
                sum(r["completion_tokens"] for r in chosen) / len(chosen), 1
            ),
        }
        if task == cluster_many.TASK:
            parts = sum(row["parts"] for row in chosen)
            bad = sum(row["invalid_parts"] for row in chosen)
            report[task] |= {
                "block_parts": parts,
                "invalid_parts": bad,
                "invalid_part_rate": round(bad / parts, 4) if parts else 0.0,
            }
    return report


def model_time(rows: list[dict[str, Any]], left_to_model: int) -> dict[str, Any]:
    """The model's seconds in all, and per pair the rules left to it."""
    seconds = sum(row["seconds"] for row in rows)
    return {
        "model_seconds": round(seconds, 1),
        "pairs_left_to_model": left_to_model,
        "seconds_per_pair": round(seconds / left_to_model, 2) if left_to_model else None,
    }


def changes(data: Labelled, before: dict[str, str], after: dict[str, str]) -> dict[str, int]:
    """Pairs merged in one run and not in the other (``before``: canaries off), right or
    wrong by the labels; doubtful pairs left out as in every count."""
    out = {"unmerged_right": 0, "unmerged_wrong": 0, "merged_right": 0, "merged_wrong": 0}
    for ids in data.blocks():
        for a, b in combinations(ids, 2):
            if frozenset((a, b)) in data.doubtful:
                continue
            was, now = before[a] == before[b], after[a] == after[b]
            if was == now:
                continue
            kind = "merged" if now else "unmerged"
            out[f"{kind}_{'right' if data.gold[a] == data.gold[b] else 'wrong'}"] += 1
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    data = sample(load_set(args.set), args.blocks, args.seed, args.hard_blocks)
    embedder = CachedEmbedder(UseEmbedder())
    config = DeduplicateRelationsConfig(concurrency=1)
    mapping, result, _ = await run(data, None, embedder, config)
    left_to_model = result["llm_needed_pair_count"]
    report: dict[str, Any] = {
        "set": args.set,
        "records": len(data.records),
        "blocks": len(data.blocks()),
        "hard_negative_blocks": sum(holds_hard_negative(data, b) for b in data.blocks()),
        "rules only": {**figures(data, mapping, result), "pairs_left_to_model": left_to_model},
    }
    mappings: dict[tuple[str, int, float], dict[str, str]] = {}
    for mode, pack, rate in [
        (m, k, r) for m in args.modes for k in args.pack_tokens for r in args.canaries
    ]:
        label = f"LLM, {mode}, pack {pack}, canaries {rate:g}"
        canaries = {
            "canaries": rate,
            "canary_tokens": args.canary_tokens,
            "llm_pack_tokens": pack,
        }
        model = OpenAICompatibleModel(
            base_url=args.base_url,
            model=MODEL_ALIAS,
            response_format=mode,
            timeout=args.timeout,
            max_retries=1,
        )
        log = CACHE / f"pipeline-{mode}-{pack}-{rate:g}-{args.stamp}.jsonl"
        recorder = Recorder(model, log=log)
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
            **model_time(recorder.rows, left_to_model),
            "by_task": by_task(recorder.rows),
            "llm_merges": llm_merges(data, decisions),
            "canaries": result["canaries"],
        }
        mappings[(mode, pack, rate)] = mapping
        (CACHE / f"mapping-{mode}-{pack}-{rate:g}-{args.stamp}.json").write_text(
            json.dumps(mapping, indent=0)
        )
        print(f"{label}: {json.dumps(report[label])}", flush=True)
    for (mode, pack, rate), mapping in mappings.items():
        if rate and (mode, pack, 0.0) in mappings:
            report[f"LLM, {mode}, pack {pack}, canaries {rate:g}"]["changed_by_canaries"] = changes(
                data, mappings[(mode, pack, 0.0)], mapping
            )
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
    print(
        f"\n{report['set']} set: {report['records']} records, "
        f"{report['blocks']} multi-record blocks "
        f"({report['hard_negative_blocks']} with a documented hard-negative pair); "
        f"{report['rules only']['pairs_left_to_model']} pairs left to the model"
    )
    print(
        f"{'run':<34}{'P':>7}{'R':>7}{'F1':>7}{'HN':>4}{'requests':>10}{'invalid':>9}"
        f"{'s/req':>7}  canaries"
    )
    for name in [key for key in report if isinstance(report[key], dict)]:
        row = report[name]
        tasks = row.get("by_task", {})
        seconds = [t["seconds_per_request"] for t in tasks.values()]
        print(
            f"{name:<34}{row['precision']:>7.3f}{row['recall']:>7.3f}{row['f1']:>7.3f}"
            f"{row['hard_negative_merges']:>4}{row['llm_requests']:>10}"
            f"{row['llm_invalid_answers']:>9}{(max(seconds) if seconds else 0):>7.1f}"
            f"  {canary_note(row.get('canaries'))}"
        )
        if tasks:
            print(
                f"    prompt tokens {row['prompt_tokens']}, completion tokens "
                f"{row['completion_tokens']}, model {row['model_seconds']} s, "
                f"{row['seconds_per_pair']} s per pair left to the model"
            )
        if "changed_by_canaries" in row:
            print(f"    changed by canaries: {json.dumps(row['changed_by_canaries'])}")
        for task, figures_ in tasks.items():
            print(f"    {task:<18} {json.dumps(figures_)}")


def canary_note(canaries: dict[str, Any] | None) -> str:
    if not canaries or not canaries["asked"]:
        return "-"
    note = f"{canaries['right']}/{canaries['answered']} right"
    verdict = str(canaries.get("verdict", "")).replace("_", " ")
    return (
        note
        + (f", {verdict}" if verdict else "")
        + (": merges not applied" if canaries["distrusted"] else "")
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--modes", nargs="*", default=["json_object", "none"], help="response formats to run"
    )
    parser.add_argument(
        "--set",
        choices=SETS,
        default="dev",
        help="labelled set to sample: the dev set, the labelled blocks of the five real "
        "graphs, or the synthetic held-out kinds",
    )
    parser.add_argument("--blocks", type=int, default=0, help="sample of blocks; 0 = all")
    parser.add_argument(
        "--hard-blocks",
        type=int,
        default=0,
        help="of the sample, blocks drawn from those with a documented hard-negative pair",
    )
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
    defaults = DeduplicateRelationsConfig()
    parser.add_argument("--canary-tokens", type=float, default=defaults.canary_tokens)
    parser.add_argument(
        "--pack-tokens",
        type=int,
        nargs="+",
        default=[defaults.llm_pack_tokens],
        help="llm_pack_tokens budgets to run (0: one request per question)",
    )
    parser.add_argument(
        "--changes",
        nargs=2,
        type=Path,
        metavar=("OFF", "ON"),
        help="only compare two saved mappings of the sample (canaries off, on)",
    )
    return parser.parse_args()


def compare(args: argparse.Namespace) -> None:
    """``--changes OFF ON``: what the canaries changed between two runs' saved mappings
    (``.cache/mapping-*.json``) of the same sample (give the runs' ``--set``, ``--blocks``,
    ``--seed`` and ``--hard-blocks``), run apart (e.g. in parallel)."""
    data = sample(load_set(args.set), args.blocks, args.seed, args.hard_blocks)
    before, after = (json.loads(Path(path).read_text()) for path in args.changes)
    counts = pair_counts(data, after)
    print(
        json.dumps(
            {
                "set": args.set,
                "changed_by_canaries": changes(data, before, after),
                "after": {
                    "precision": round(counts.precision, 4),
                    "recall": round(counts.recall, 4),
                    "hard_negative_merges": len(counts.hard_negative_merges),
                },
            }
        )
    )


def main() -> None:
    args = parse_args()
    if args.changes:
        compare(args)
        return
    args.data = DEV
    args.stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{args.port}"
    CACHE.mkdir(parents=True, exist_ok=True)
    process = None
    if args.base_url is None and args.modes:
        args.base_url = f"http://127.0.0.1:{args.port}/v1"
        args.server_log = CACHE / f"server-{args.stamp}.log"
        process = start_server(args, args.server_log)
    args.process = process
    try:
        if process is not None:
            wait_ready(args.base_url, process, timeout=300)
        report = asyncio.run(main_async(args))
    finally:
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:  # still computing an abandoned request
                process.kill()
                process.wait()
    show(report)
    (CACHE / f"pipeline-{args.stamp}.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
