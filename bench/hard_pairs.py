"""The incremental judge on the labelled hard pairs of the dev set.

    python bench/hard_pairs.py [--dev ../shared/data/dev] [--error-rate 0.0]
    python bench/hard_pairs.py --base-url http://127.0.0.1:8791/v1 --model NAME  # a real LLM

Each line of ``pairs_hard.jsonl`` is an ``existing`` relation, a ``candidate`` and a label
(merge / keep_both). :class:`relmerge.RelationJudge` checks the candidate against the
existing relation with both entities' profiles, asking the gold-answering judge server
(``bench/judge_server.py``, on 127.0.0.1) only when its tiers cannot decide. Pairs whose
ids are not in ``gold.jsonl`` are answered from the pair's own label. Prints accuracy,
LLM requests per pair, decisions by tier, and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_server import JudgeServer
from relmerge import DeduplicateRelationsConfig, JudgeContext, RelationJudge
from relmerge.eval.gold import load_gold
from relmerge.eval.gold_judge import GoldJudge
from relmerge.io.load import read_entities
from relmerge.providers.base import LanguageModel
from relmerge.providers.embedding import EmbeddingModel
from relmerge.providers.openai_compat import OpenAICompatibleModel

REPO = Path(__file__).resolve().parents[1]


def load_pairs(dev: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (dev / "pairs_hard.jsonl").read_text().splitlines()]


def pair_records(pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pairs' records, for the gold judge to recognise a record shown under another id."""
    return [pair[side] for pair in pairs for side in ("existing", "candidate")]


def extended_gold(gold: dict[str, str], pairs: list[dict[str, Any]]) -> dict[str, str]:
    """Gold plus labels for the pairs' own ids (some exist only in pairs_hard.jsonl)."""
    extended = dict(gold)
    for index, pair in enumerate(pairs):
        old, new = pair["existing"]["relation_id"], pair["candidate"]["relation_id"]
        same = pair["label"] == "merge"
        if old not in extended:
            extended[old] = extended.get(new, f"pair:{index}") if same else f"pair:{index}:old"
        if new not in extended:
            extended[new] = extended[old] if same else f"pair:{index}:new"
    return extended


def canonical(relation: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    return {
        **relation,
        "source_entity_id": mapping.get(relation["source_entity_id"], relation["source_entity_id"]),
        "target_entity_id": mapping.get(relation["target_entity_id"], relation["target_entity_id"]),
    }


async def judge_each(
    dev: Path,
    pairs: list[dict[str, Any]],
    llm: LanguageModel,
    config: DeduplicateRelationsConfig | None = None,
    embedder: EmbeddingModel | None = None,
) -> list[dict[str, Any]]:
    """Each pair's verdict (with its label), the candidate checked against the existing one."""
    mapping = json.loads((dev / "entity_id_mapping.json").read_text())
    profiles = {e.entity_id: e for e in read_entities(dev / "entities.jsonl")}
    judge = RelationJudge(llm=llm, config=config, embedder=embedder)
    rows = []
    for pair in pairs:
        existing = canonical(pair["existing"], mapping)
        candidate = canonical(pair["candidate"], mapping)
        source = profiles.get(existing["source_entity_id"])
        target = profiles.get(existing["target_entity_id"])
        context = JudgeContext(
            source_name=source.name if source else existing["source_entity_name"],
            target_name=target.name if target else existing["target_entity_name"],
            source_profile=source.profile if source else None,
            target_profile=target.profile if target else None,
            source_id=existing["source_entity_id"],
            target_id=existing["target_entity_id"],
        )
        verdict = await judge.check(candidate, [existing], context)
        rows.append({"label": pair["label"], **verdict.model_dump(mode="json")})
    return rows


async def judge_all(
    dev: Path, base_url: str, model: str = "gold-judge", response_format: str = "json_schema"
) -> list[dict[str, Any]]:
    llm = OpenAICompatibleModel(
        base_url=base_url,
        model=model,
        response_format=response_format,  # type: ignore[arg-type]
        timeout=300,
    )
    try:
        return await judge_each(dev, load_pairs(dev), llm)
    finally:
        await llm.aclose()


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy, requests and decisions by tier of judged pairs."""
    requests = sum(row["llm_requests"] for row in rows)
    by_tier: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for row in rows:
        by_tier[row["tier"]][0] += 1
        by_tier[row["tier"]][1] += row["decision"] == row["label"]
    return {
        "pairs": len(rows),
        "accuracy": round(sum(r["decision"] == r["label"] for r in rows) / max(1, len(rows)), 4),
        "llm_requests": requests,
        "llm_requests_per_pair": round(requests / max(1, len(rows)), 3),
        "by_tier": {tier: {"decided": c, "right": r} for tier, (c, r) in by_tier.items()},
        "wrong": [
            {"label": r["label"], "said": r["decision"], "tier": r["tier"], "reason": r["reason"]}
            for r in rows
            if r["decision"] != r["label"]
        ],
    }


async def judge_pairs(
    dev: Path,
    pairs: list[dict[str, Any]],
    gold: dict[str, str],
    config: DeduplicateRelationsConfig | None = None,
    embedder: EmbeddingModel | None = None,
    error_rate: float = 0.0,
) -> dict[str, Any]:
    """``pairs`` judged with an in-process gold-answering model: the summary figures."""
    model = GoldJudge(extended_gold(gold, pairs), error_rate, records=pair_records(pairs))
    return summary(await judge_each(dev, pairs, model, config, embedder))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", type=Path, default=REPO.parent / "shared" / "data" / "dev")
    parser.add_argument("--error-rate", type=float, default=0.0)
    parser.add_argument("--base-url", help="a real OpenAI-compatible server instead of gold")
    parser.add_argument("--model", default="gold-judge")
    parser.add_argument("--response-format", default="json_object")
    args = parser.parse_args()
    pairs = load_pairs(args.dev)
    gold = extended_gold(load_gold(args.dev / "gold.jsonl"), pairs)
    if args.base_url:
        rows = asyncio.run(judge_all(args.dev, args.base_url, args.model, args.response_format))
    else:
        judge = GoldJudge(gold, args.error_rate, records=pair_records(pairs))
        with JudgeServer(judge) as server:
            rows = asyncio.run(judge_all(args.dev, server.base_url))
    figures = summary(rows)
    print(
        f"pairs {figures['pairs']}  accuracy {figures['accuracy']:.3f}  LLM requests "
        f"{figures['llm_requests']} ({figures['llm_requests_per_pair']:.2f} per pair)"
    )
    for tier, counts in sorted(figures["by_tier"].items()):
        print(f"  {tier:<18} {counts['decided']:>3} decided, {counts['right']:>3} right")
    for wrong in figures["wrong"]:
        print(
            f"  wrong: label {wrong['label']}, said {wrong['said']} ({wrong['tier']}): "
            f"{wrong['reason'][:100]}"
        )
    figures |= {
        "error_rate": args.error_rate,
        "model": args.model,
        "policy_decided": sum(1 for r in rows if r["tier"] == "policy"),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
