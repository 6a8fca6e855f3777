"""The two failure kinds of issue 26 on a set no rule was written from.

    python bench/held_out_kinds.py [--json FILE]

``tests/data/held_out_kinds`` (zh / en / fr; finance stakes, sports transfers,
succession): an event of change against a state with the same number, and a passive or
inverse marker standing apart from its verb. Runs the step with the shipped defaults and
the default embedder, rules only and with the gold-answering judge, and decides every
within-block pair by the rules alone with every cosine at 1.0 (what no embedding can
worsen). Uses only the step and the kernel's pair API, so that the same script measures an
older kernel for the figure before the change::

    git archive c33ff10 src | tar -x -C /tmp/before
    PYTHONPATH=/tmp/before/src python bench/held_out_kinds.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import defaultdict
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from labelled import Labelled, load_held_out_kinds, pair_counts
from relmerge import DeduplicateRelations, DeduplicateRelationsConfig, DictContext
from relmerge.decide.features import relation_features
from relmerge.decide.job import orientation
from relmerge.decide.lexicon import load_lexicon
from relmerge.decide.scores import BlockScores
from relmerge.decide.tiers import decide_pair
from relmerge.eval.gold_judge import GoldJudge
from relmerge.model import ExtractedRelation
from relmerge.providers.base import LanguageModel
from relmerge.providers.embedding import CachedEmbedder
from relmerge.providers.use_embed import UseEmbedder
from relmerge.stores import MemoryStore


async def run(data: Labelled, llm: LanguageModel | None) -> dict[str, Any]:
    store = MemoryStore()
    keys = []
    for record in data.records:
        key = f"relations/{record['relation_id']}.json"
        store.objects[key] = json.dumps(record).encode()
        keys.append(key)
    config = DeduplicateRelationsConfig(
        decisions_key=None, clarifications_key=None, rejected_key=None
    )
    context = DictContext(
        components={
            "stores.objects": store,
            "models.language": llm,
            "models.embedding": CachedEmbedder(UseEmbedder()),
        },
        artifacts={"relation_keys": keys, "entity_id_mapping": {}, "entities": []},
    )
    output = await DeduplicateRelations(config).run(context)
    counts = pair_counts(data, output.relation_id_mapping)
    names = {r["relation_id"]: r["name"] for r in data.records}
    return {
        "precision": round(counts.precision, 4),
        "recall": round(counts.recall, 4),
        "wrong_merges": [[names[a], names[b]] for a, b in counts.wrong],
        "hard_negative_merges": [list(pair) for pair in counts.hard_negative_merges],
        "requests_per_relation": round(output.result["llm_requests"] / len(data.records), 4),
    }


def at_full_cosine(data: Labelled) -> dict[str, Any]:
    """Rules-only merges of every within-block pair with every cosine at 1.0."""
    lexicon, config = load_lexicon(), DeduplicateRelationsConfig()
    blocks: dict[frozenset[str], list[ExtractedRelation]] = defaultdict(list)
    for record in data.records:
        relation = ExtractedRelation.model_validate(record)
        blocks[frozenset((relation.source_entity_id, relation.target_entity_id))].append(relation)
    merged, wrong = 0, []
    for members in blocks.values():
        features = [relation_features(r, lexicon) for r in members]
        ones = np.ones((len(members), 4), dtype=np.float32) / 2.0
        scores = BlockScores(features, ones, ones)
        for a, b in combinations(range(len(members)), 2):
            ra, rb = members[a], members[b]
            pair = (features[a], features[b])
            decision = decide_pair(a, b, pair, orientation(ra, rb), scores.pair(a, b), config)
            if decision.verdict == "merge":
                merged += 1
                if data.gold[ra.relation_id] != data.gold[rb.relation_id]:
                    wrong.append([ra.name, rb.name])
    return {"merges": merged, "wrong_merges": wrong}


async def main_async() -> dict[str, Any]:
    data = load_held_out_kinds()
    none = await run(data, None)
    gold = await run(data, GoldJudge(data.gold, records=data.records))
    worst = at_full_cosine(data)
    print(
        f"held-out kinds: {len(data.records)} relations, {len(data.hard_negatives)} hard negatives"
    )
    print(f"{'run':<28}{'P':>7}{'R':>7}{'wrong':>7}{'HN':>5}{'req/rel':>9}")
    for label, row in (("rules only", none), ("gold judge", gold)):
        print(
            f"{label:<28}{row['precision']:>7.3f}{row['recall']:>7.3f}"
            f"{len(row['wrong_merges']):>7}{len(row['hard_negative_merges']):>5}"
            f"{row['requests_per_relation']:>9.3f}"
        )
    print(
        f"{'rules only, every cosine 1.0':<28}{'':>14}{len(worst['wrong_merges']):>7}"
        f"   ({worst['merges']} merges)"
    )
    for a, b in none["wrong_merges"]:
        print(f"  rules only, wrong merge: {a!r} ~ {b!r}")
    return {"rules_only": none, "gold_judge": gold, "full_cosine": worst}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    args = parser.parse_args()
    figures = asyncio.run(main_async())
    if args.json:
        args.json.write_text(json.dumps(figures, ensure_ascii=False, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
