"""What relmerge sends its model, per labelled graph: requests, prompt characters and
tokens per relation, and pair F1, with the gold-answering judge of ``judge_server.py``
counting what it receives over real HTTP.

    python bench/tokens.py [--dev ../shared/data/dev] [--embedding use|hash] [--error-rate 0.0]
                           [--pack-tokens 0 8000 ...] [--canaries SHARE] [--seeds N]
                           [--canary-tokens SHARE]

Sets: the three dev domains and the five labelled real graphs (``labelled.all_sets``).
Each row is one run of the step (a memory store, the default settings, no cache) with
the OpenAI-compatible client against a fresh server. Tokens are the server's estimate
(``judge_server.estimated_tokens``: ~4 characters a token) and, beside them, the run's own
count from the server's ``usage`` (``cost`` of the result): they must agree. Prints one
row per set and packing (``--pack-tokens``: ``llm_pack_tokens`` values, 0 = one request
per question; by default 0 and the default, side by side), and one JSON line with every
figure. ``--canaries 0`` measures packing alone (canary records ride in every request).
Each packed request's canary share is measured as it is made: the prompt characters its
canary records add over the same request without them (``canary share`` columns: the
largest over the run's packed requests, and all packed requests together).
``--seeds N`` runs the judge with seeds 0..N-1 and shows the mean pair F1 (with its
standard error in the JSON line): with
``--error-rate`` one seed's noise decides whether a run's canary verdict stops the
model, so one seed's F1 says little.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_server import JudgeServer, estimated_tokens
from labelled import DEV, Labelled, all_sets, pair_counts
from relmerge import DeduplicateRelations, DeduplicateRelationsConfig, DictContext
from relmerge.decide import pack as packing
from relmerge.eval.gold_judge import GoldJudge
from relmerge.prompts import cluster_many
from relmerge.providers.embedding import EmbeddingModel, HashEmbedder
from relmerge.providers.openai_compat import OpenAICompatibleModel
from relmerge.stores.memory import MemoryStore


@contextmanager
def pack_shares() -> Iterator[list[tuple[int, int]]]:
    """Per packed request made inside: (prompt characters without its canaries, with)."""
    made: list[tuple[int, int]] = []
    original = packing.Packer._add_canaries

    def measured(self: packing.Packer, questions: list[Any]) -> None:
        original(self, questions)
        plain = [cluster_many.Part(q.records, q.entities, {}) for q in questions]
        sizes = [
            sum(len(m.content) for m in cluster_many.build_request(p, temperature=0).messages)
            for p in (plain, [q.part for q in questions])
        ]
        made.append((sizes[0], sizes[1]))

    setattr(packing.Packer, "_add_canaries", measured)  # noqa: B010
    try:
        yield made
    finally:
        setattr(packing.Packer, "_add_canaries", original)  # noqa: B010


async def run_set(
    data: Labelled,
    embedder: EmbeddingModel,
    error_rate: float,
    pack_tokens: int = 0,
    pack_records: int = 60,
    canaries: float | None = None,
    seed: int = 0,
    canary_tokens: float | None = None,
) -> dict[str, Any]:
    """One run of ``data`` against a fresh gold judge server, and what it cost."""
    store = MemoryStore()
    keys = []
    for record in data.records:
        key = f"relations/{record['relation_id']}.json"
        store.objects[key] = json.dumps(record).encode()
        keys.append(key)
    config = DeduplicateRelationsConfig(
        decisions_key=None,
        clarifications_key=None,
        rejected_key=None,
        llm_pack_tokens=pack_tokens,
        llm_pack_records=pack_records,
        **({} if canaries is None else {"canaries": canaries}),
        **({} if canary_tokens is None else {"canary_tokens": canary_tokens}),
    )
    with JudgeServer(GoldJudge(data.gold, error_rate, seed, records=data.records)) as server:
        llm = OpenAICompatibleModel(base_url=server.base_url, model="gold-judge")
        context = DictContext(
            components={
                "stores.objects": store,
                "models.language": llm,
                "models.embedding": embedder,
            },
            artifacts={
                "relation_keys": keys,
                "entity_id_mapping": data.mapping,
                "entities": data.entities,
            },
        )
        with pack_shares() as shares:
            output = await DeduplicateRelations(config).run(context)
        await llm.aclose()
        requests, chars, by_task = server.requests, server.prompt_chars, dict(server.by_task)
    relations = max(1, len(data.records))
    counts = pair_counts(data, output.relation_id_mapping)
    cost = output.result["cost"]
    return {
        "set": data.name,
        "pack_tokens": pack_tokens,
        "relations": len(data.records),
        "requests": requests,
        "requests_per_relation": round(requests / relations, 4),
        "prompt_chars_per_relation": round(chars / relations, 1),
        "prompt_tokens_per_relation": round(estimated_tokens(chars) / relations, 1),
        "chars_per_request": round(chars / requests) if requests else 0,
        "run_prompt_tokens": cost["prompt_tokens"],
        "by_task": {task: {"requests": n, "prompt_chars": c} for task, (n, c) in by_task.items()},
        "pair_f1": round(counts.f1, 4),
        "packed_requests_with_canaries": sum(with_ > without for without, with_ in shares),
        "canary_share_max": round(max((w / o - 1 for o, w in shares), default=0.0), 4),
        "canary_share_all": round(
            sum(w for _, w in shares) / sum(o for o, _ in shares) - 1 if shares else 0.0, 4
        ),
        "canaries": {
            key: output.result["canaries"][key]
            for key in ("asked", "answered", "right", "verdict", "decided_after")
        },
    }


def show(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'set':<38}{'pack':>6}{'relations':>10}{'requests':>9}{'req/rel':>9}{'chars/rel':>11}"
        f"{'tokens/rel':>11}{'chars/req':>10}{'pair F1':>9}{'canary share':>14}{'canaries':>10}"
    )
    for row in rows:
        print(
            f"{row['set']:<38}{row['pack_tokens']:>6}{row['relations']:>10}{row['requests']:>9}"
            f"{row['requests_per_relation']:>9.3f}{row['prompt_chars_per_relation']:>11.1f}"
            f"{row['prompt_tokens_per_relation']:>11.1f}{row['chars_per_request']:>10}"
            f"{row['pair_f1']:>9.3f}{row['canary_share_max']:>14.1%}"
            f"{row['canaries']['answered']:>10}"
        )


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.embedding == "hash":
        embedder: EmbeddingModel = HashEmbedder()
    else:
        from relmerge.providers.use_embed import UseEmbedder

        embedder = UseEmbedder()
    rows = []
    for data in all_sets(args.dev):
        if args.only and not any(part in data.name for part in args.only):
            continue
        for pack in args.pack_tokens:
            runs = [
                await run_set(
                    data,
                    embedder,
                    args.error_rate,
                    pack,
                    args.pack_records,
                    args.canaries,
                    seed,
                    args.canary_tokens,
                )
                for seed in range(args.seeds)
            ]
            row = runs[0]
            if args.seeds > 1:  # the judge's noise drawn anew per seed: F1 as a mean
                f1s = [run["pair_f1"] for run in runs]
                row = {
                    **row,
                    "pair_f1": round(statistics.mean(f1s), 4),
                    "pair_f1_standard_error": round(statistics.stdev(f1s) / len(f1s) ** 0.5, 4),
                    "pair_f1_by_seed": f1s,
                }
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--embedding", choices=("use", "hash"), default="use")
    parser.add_argument("--error-rate", type=float, default=0.0)
    default = DeduplicateRelationsConfig().llm_pack_tokens
    parser.add_argument(
        "--pack-tokens",
        type=int,
        nargs="+",
        default=[0, default],
        help=f"llm_pack_tokens values to run [0 (one request per question) and {default}]",
    )
    parser.add_argument("--pack-records", type=int, default=60, help="llm_pack_records")
    parser.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="judge seeds 0..N-1 (its noise with --error-rate); rows show the mean pair F1 "
        "and the first seed's other figures",
    )
    parser.add_argument("--only", nargs="*", help="run only the sets whose name has one of these")
    parser.add_argument(
        "--canaries", type=float, default=None, help="canaries share (unset: the default)"
    )
    parser.add_argument(
        "--canary-tokens", type=float, default=None, help="canary_tokens (unset: the default)"
    )
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error("--seeds must be 1 or more")
    rows = asyncio.run(main_async(args))
    show(rows)
    print(json.dumps({"embedding": args.embedding, "rows": rows}, ensure_ascii=False))


if __name__ == "__main__":
    main()
