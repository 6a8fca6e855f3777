"""Where the first stage may settle a pair the cosine band reads: chosen, and held out.

    python bench/first_stage.py [--synthetic 4000] [--json FILE]

The two-stage embedding (``relmerge.stages.semantic.two_stage``) lets a block whose every
pair read by ``auto_merge_cosine`` scores at or above ``first_stage_merge_cosine`` on
*first-stage* vectors merge on them, without the full model. That is safe only where the
full model would merge those pairs too, and where the merges are right. This script:

1. scores, on every labelled set (``bench/labelled.py``: the three dev domains, the real
   graphs, the held-out kinds) and on a synthetic batch (``bench/synthetic.py``, its own
   gold), every pair whose verdict reads a cosine (``decide.vector_need``, blocks whose
   merge order does not depend on cosines, as the stage checks), with both the first
   stage's and the full model's relation vectors;
2. per set and threshold (0.55–0.90): pairs settled, pairs the full model would *not*
   merge among them (disagreements), their precision against the gold, hard negatives;
3. leave one set out: the lowest threshold with no disagreement on the other sets, and
   what it does on the set left out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from labelled import HELD_OUT_KINDS, Labelled, all_sets, load_held_out_kinds
from relmerge import DeduplicateRelationsConfig
from relmerge.decide.features import relation_features
from relmerge.decide.lexicon import lexicon_for
from relmerge.decide.scores import BlockFuzzy, relation_vectors
from relmerge.decide.text import embedding_text
from relmerge.decide.vector_need import vector_need
from relmerge.model import ExtractedRelation
from relmerge.providers.use_embed import UseEmbedder
from synthetic import generate_semantic

GRID = [round(0.55 + 0.01 * i, 2) for i in range(36)]  # 0.55 … 0.90
SHOWN = (0.6, 0.63, 0.65, 0.7, 0.75, 0.8)


@dataclass
class Pair:
    first: float  # first-stage cosine of the relation vectors
    full: float  # the full model's
    same: bool  # one gold fact
    hard_negative: bool


def _relations(data: Labelled) -> list[ExtractedRelation]:
    relations = []
    for record in data.records:
        source, target = data.ends(record)
        if source == target:
            continue
        relation = ExtractedRelation.model_validate(record)
        relations.append(
            relation.model_copy(update={"source_entity_id": source, "target_entity_id": target})
        )
    return relations


async def pairs_of(data: Labelled, config: DeduplicateRelationsConfig) -> list[Pair]:
    """Every cosine-read pair of ``data``'s blocks, scored both ways."""
    lexicon = lexicon_for(config)
    model = UseEmbedder(processes=1)
    first = model.first_stage()
    blocks: dict[frozenset[str], list[ExtractedRelation]] = {}
    for relation in _relations(data):
        key = frozenset((relation.source_entity_id, relation.target_entity_id))
        blocks.setdefault(key, []).append(relation)
    found = []
    for block in blocks.values():
        if len(block) < 2:
            continue
        features = [relation_features(r, lexicon, frozenset()) for r in block]
        need = vector_need(block, features, BlockFuzzy(features), config)
        pairs = [(a, b) for a, b, mode in need.pairs if mode == "full"]
        if need.ordered or not pairs:
            continue
        texts = [embedding_text(r, config.embedding_description_chars) for r in block]
        names = [r.name for r in block]
        size = len(block)
        full_vectors = await model.embed(texts + names)
        first_vectors = await first.embed(texts + names)
        full = relation_vectors(full_vectors[:size], full_vectors[size:])
        cheap = relation_vectors(first_vectors[:size], first_vectors[size:])
        for a, b in pairs:
            one, two = data.gold.get(block[a].relation_id), data.gold.get(block[b].relation_id)
            if one is None or two is None:
                continue
            found.append(
                Pair(
                    float(cheap[a] @ cheap[b]),
                    float(full[a] @ full[b]),
                    one == two,
                    frozenset((one, two)) in data.hard_negatives,
                )
            )
    return found


def row(pairs: list[Pair], threshold: float, band: float) -> dict[str, Any]:
    settled = [p for p in pairs if p.first >= threshold]
    right = sum(p.same for p in settled)
    return {
        "threshold": threshold,
        "pairs": len(pairs),
        "settled": len(settled),
        "disagreements": sum(p.full < band for p in settled),
        "precision": round(right / len(settled), 4) if settled else None,
        "hard_negatives": sum(p.hard_negative for p in settled),
        "full_model_precision": _precision([p for p in pairs if p.full >= band]),
    }


def _precision(pairs: list[Pair]) -> float | None:
    return round(sum(p.same for p in pairs) / len(pairs), 4) if pairs else None


def choose(pairs: list[Pair], band: float) -> float | None:
    """The lowest threshold at which the first stage settles no pair the full model would
    not merge."""
    for threshold in GRID:
        if all(p.full >= band for p in pairs if p.first >= threshold):
            return threshold
    return None


def _synthetic(size: int) -> Labelled:
    records, gold = generate_semantic(size, seed=1)
    return Labelled("synthetic", records, gold)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--synthetic", type=int, default=4000, help="0: none")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    config = DeduplicateRelationsConfig()
    band = config.auto_merge_cosine
    assert band is not None, "the cosine band is off: the first stage settles nothing"
    sets = all_sets()
    if HELD_OUT_KINDS.is_dir():
        sets.append(load_held_out_kinds())
    if args.synthetic:
        sets.append(_synthetic(args.synthetic))
    scored = {data.name: await pairs_of(data, config) for data in sets}
    scored = {name: pairs for name, pairs in scored.items() if pairs}
    print(f"band auto_merge_cosine = {band}; shipped first_stage_merge_cosine = "
          f"{config.first_stage_merge_cosine}")  # fmt: skip
    print(f"{'set':<34}{'t':>6}{'pairs':>7}{'settled':>9}{'disagree':>10}{'P':>8}{'hard':>6}")
    table = []
    for name, pairs in scored.items():
        for threshold in SHOWN:
            entry = {"set": name, **row(pairs, threshold, band)}
            table.append(entry)
            p = "—" if entry["precision"] is None else f"{entry['precision']:.3f}"
            print(
                f"{name:<34}{threshold:>6}{entry['pairs']:>7}{entry['settled']:>9}"
                f"{entry['disagreements']:>10}{p:>8}{entry['hard_negatives']:>6}"
            )
    folds = []
    print("\nleave one set out: chosen on the others, measured on it")
    for name, pairs in scored.items():
        tuning = [p for other, more in scored.items() if other != name for p in more]
        chosen = choose(tuning, band)
        held = row(pairs, chosen, band) if chosen is not None else None
        folds.append({"held_out": name, "chosen": chosen, "held_out_row": held})
        print(f"  {name:<32} chosen {chosen}: {json.dumps(held)}")
    everything = [p for pairs in scored.values() for p in pairs]
    print(f"\nchosen on every set: {choose(everything, band)}")
    if args.json:
        report = {
            "band": band,
            "shipped": config.first_stage_merge_cosine,
            "chosen_on_all": choose(everything, band),
            "table": table,
            "folds": folds,
            "pairs": {name: [asdict(p) for p in pairs] for name, pairs in scored.items()},
        }
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
