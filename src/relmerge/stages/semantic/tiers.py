"""Scores and tiers for the pairs of one block, cheapest decision first (seed 000).

Each pair gets a fuzzy ratio over name + description (+ attribute values) — never the name
alone — and an embedding cosine, then one verdict:

* ``direction`` (hard keep): reversed endpoints and neither name is symmetric (R2);
* ``known_distinct`` (hard keep): an earlier LLM answer split these two apart;
* ``guard`` (to the LLM): numbers, roles, negation, opposite meaning or voice differ;
* ``fuzzy_high`` (merge): fuzzy ≥ ``auto_merge_fuzzy``;
* ``embedding_high`` (merge): cosine ≥ ``auto_merge_cosine``, or the relation names'
  cosine ≥ ``auto_merge_name_cosine`` with a text cosine ≥ ``auto_merge_min_cosine``
  (on the dev set the name's meaning is the strongest single signal: "capital of" and
  "part of" share a description style but not a predicate);
* ``detail_match`` (merge): both name exactly the same numbers (a date, an amount) and
  the cosine reaches ``auto_merge_detail_cosine`` — a shared specific detail is strong
  evidence across languages, where names and wording share nothing;
* ``fuzzy_low`` (keep): fuzzy < ``auto_keep_fuzzy`` and cosine < ``auto_keep_cosine``
  (cross-language duplicates have fuzzy ≈ 0, so fuzzy alone never keeps them apart);
* ``band`` (to the LLM): everything in between.

A hard keep can never be overridden, not even by the LLM.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from rapidfuzz import fuzz, process

from relmerge.config import DeduplicateRelationsConfig
from relmerge.providers.embedding import Vectors
from relmerge.stages.semantic.features import RelationFeatures
from relmerge.stages.semantic.guards import fired_guards

Verdict = Literal["merge", "keep", "undecided"]


@dataclass(frozen=True)
class PairDecision:
    a: int
    b: int
    verdict: Verdict
    tier: str
    hard: bool = False
    guards: tuple[str, ...] = ()
    scores: dict[str, float] = field(default_factory=dict)


def block_scores(texts: Sequence[str], vectors: Vectors) -> tuple[Any, Vectors]:
    """Fuzzy ratio and cosine matrices for the units of one block."""
    fuzzy = process.cdist(texts, texts, scorer=fuzz.ratio, dtype=np.float32, workers=1)
    cosine = vectors @ vectors.T
    return fuzzy, cosine


def decide_pair(
    a: int,
    b: int,
    features: tuple[RelationFeatures, RelationFeatures],
    same_direction: bool,
    fuzzy: float,
    cosine: float,
    name_cosine: float,
    config: DeduplicateRelationsConfig,
    known_distinct: bool = False,
) -> PairDecision:
    fa, fb = features
    scores = {
        "fuzzy": round(float(fuzzy), 2),
        "cosine": round(float(cosine), 4),
        "name_cosine": round(float(name_cosine), 4),
    }
    if not same_direction and not (fa.symmetric or fb.symmetric):
        return PairDecision(a, b, "keep", "direction", hard=True, scores=scores)
    if known_distinct:
        return PairDecision(a, b, "keep", "known_distinct", hard=True, scores=scores)
    guards = tuple(fired_guards(fa, fb))
    if guards:
        return PairDecision(a, b, "undecided", "guard", guards=guards, scores=scores)
    if fuzzy >= config.auto_merge_fuzzy:
        return PairDecision(a, b, "merge", "fuzzy_high", scores=scores)
    if config.auto_merge_cosine is not None and cosine >= config.auto_merge_cosine:
        return PairDecision(a, b, "merge", "embedding_high", scores=scores)
    if (
        config.auto_merge_name_cosine is not None
        and not (fa.generic_name or fb.generic_name)  # "related" = "related" proves nothing
        and name_cosine >= config.auto_merge_name_cosine
        and cosine >= config.auto_merge_min_cosine
    ):
        return PairDecision(a, b, "merge", "embedding_high", scores=scores)
    if (
        config.auto_merge_detail_cosine is not None
        and fa.numbers
        and fa.numbers == fb.numbers
        and cosine >= config.auto_merge_detail_cosine
    ):
        return PairDecision(a, b, "merge", "detail_match", scores=scores)
    if fuzzy < config.auto_keep_fuzzy and cosine < config.auto_keep_cosine:
        return PairDecision(a, b, "keep", "fuzzy_low", scores=scores)
    return PairDecision(a, b, "undecided", "band", scores=scores)
