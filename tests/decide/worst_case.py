"""Rules-only decisions with every cosine at its maximum: what no embedding can worsen."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np

from relmerge import DeduplicateRelationsConfig
from relmerge.decide.features import relation_features
from relmerge.decide.job import orientation
from relmerge.decide.lexicon import load_lexicon
from relmerge.decide.scores import BlockScores
from relmerge.decide.tiers import decide_pair
from relmerge.model import ExtractedRelation


@dataclass(frozen=True)
class Decided:
    names: tuple[str, str]
    clusters: tuple[str, str]
    verdict: str
    tier: str


def jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def decide_at_full_cosine(
    records: list[dict[str, object]], gold: dict[str, str], mapping: dict[str, str]
) -> list[Decided]:
    """Every within-block pair, decided by the kernel with the shipped defaults, its real
    fuzzy ratios and a cosine of 1.0: a merge here is one some embedding could make."""
    lexicon = load_lexicon()
    config = DeduplicateRelationsConfig()
    relations = []
    for record in records:
        source = mapping.get(str(record["source_entity_id"]), str(record["source_entity_id"]))
        target = mapping.get(str(record["target_entity_id"]), str(record["target_entity_id"]))
        if source != target:
            fields = {**record, "source_entity_id": source, "target_entity_id": target}
            relations.append(ExtractedRelation.model_validate(fields))
    blocks: dict[frozenset[str], list[ExtractedRelation]] = defaultdict(list)
    for relation in relations:
        blocks[frozenset((relation.source_entity_id, relation.target_entity_id))].append(relation)
    decided = []
    for members in blocks.values():
        features = [relation_features(r, lexicon) for r in members]
        ones = np.ones((len(members), 4), dtype=np.float32) / 2.0  # every cosine is 1.0
        scores = BlockScores(features, ones, ones)
        for a, b in combinations(range(len(members)), 2):
            ra, rb = members[a], members[b]
            decision = decide_pair(
                a, b, (features[a], features[b]), orientation(ra, rb), scores.pair(a, b), config
            )
            decided.append(
                Decided(
                    (ra.name, rb.name),
                    (gold[ra.relation_id], gold[rb.relation_id]),
                    decision.verdict,
                    decision.tier,
                )
            )
    return decided
