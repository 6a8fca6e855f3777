"""The tier verdict of one pair, cheapest decision first (seed 000).

Automatic merges only where the evidence cannot mean two facts:

* ``endpoints`` (hard keep): the two relations are not between the same two entities;
* ``known_distinct`` (hard keep): an earlier LLM answer split these two apart;
* ``direction`` (hard keep): endpoints reversed, neither relation symmetric and one known
  to be directed (a directed word, a role, a passive or receiving form — R2);
* ``direction_unknown`` (to the LLM): endpoints reversed and nobody knows whether the
  relations are symmetric ("表亲", "co-located with", a generic "related"): the LLM sees
  both directions and the profiles and decides; nothing binds it to a guess;
* ``guard`` (to the LLM): numbers, roles, negation, opposite meaning, voice, or an event
  against a state differ;
* ``fuzzy_high`` (merge): near-identical wording (fuzzy ≥ ``auto_merge_fuzzy``) that
  only adds or leaves out words; one that substitutes words is guard ``wording``;
* ``embedding_high`` / ``description_high`` (merge): the cosine band of the pair's mode,
  only where a threshold is set — the shipped defaults come from ``bench/calibrate.py``,
  which enables a band only where its precision on data it was not tuned on is ≥ 0.99.
  With names (full mode) both must name the same known kinds of relation or roles
  (the vocabulary's ``predicates`` and ``roles``), every word of each explained by the
  vocabulary: an unknown name, or an unexplained word in one, is no evidence;
* ``fuzzy_low`` (keep): fuzzy < ``auto_keep_fuzzy`` and cosine below the mode's keep
  cosine (cross-language duplicates have fuzzy ≈ 0, so fuzzy alone never keeps them);
* ``band`` (to the LLM): everything in between.

A hard keep can never be overridden, not even by the LLM. A relation name alone, or a
shared number alone, never merges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.features import RelationFeatures
from relmerge.decide.guards import fired_guards, substituted
from relmerge.decide.scores import PairScores

Verdict = Literal["merge", "keep", "undecided"]
Orientation = Literal["same", "reversed", "other"]


@dataclass(frozen=True)
class PairDecision:
    a: int
    b: int
    verdict: Verdict
    tier: str
    hard: bool = False
    guards: tuple[str, ...] = ()
    scores: dict[str, float] = field(default_factory=dict)
    mode: str = "full"


def same_known_kind(a: RelationFeatures, b: RelationFeatures) -> bool:
    """Both names state the same known kinds of relation (capital of / 省会) or roles,
    and every word of each is explained by the vocabulary ("raised its stake in" is not
    of the kind "stake in": a word the vocabulary cannot explain may change the fact)."""
    return bool(a.kinds) and a.kinds == b.kinds


def _merge_cosine(mode: str, config: DeduplicateRelationsConfig) -> float | None:
    return config.auto_merge_cosine if mode == "full" else config.auto_merge_description_cosine


def _keep_cosine(mode: str, config: DeduplicateRelationsConfig) -> float:
    return config.auto_keep_cosine if mode == "full" else config.auto_keep_description_cosine


def _low(scores: PairScores, config: DeduplicateRelationsConfig) -> bool:
    return scores.fuzzy < config.auto_keep_fuzzy and scores.cosine < _keep_cosine(
        scores.mode, config
    )


def decide_pair(
    a: int,
    b: int,
    features: tuple[RelationFeatures, RelationFeatures],
    orientation: Orientation,
    scores: PairScores,
    config: DeduplicateRelationsConfig,
    known_distinct: bool = False,
) -> PairDecision:
    fa, fb = features
    shown = scores.as_dict()

    def verdict(
        verdict: Verdict, tier: str, hard: bool = False, guards: tuple[str, ...] = ()
    ) -> PairDecision:
        return PairDecision(a, b, verdict, tier, hard, guards, shown, scores.mode)

    if orientation == "other":
        return verdict("keep", "endpoints", hard=True)
    if known_distinct:
        return verdict("keep", "known_distinct", hard=True)
    guards = tuple(fired_guards(fa, fb))
    # A symmetric relation reads the same both ways: reversed against it is no reversal.
    if orientation == "reversed" and not (fa.symmetric or fb.symmetric):
        if "directed" in (fa.symmetry, fb.symmetry):
            return verdict("keep", "direction", hard=True)
        if _low(scores, config) and not guards:
            return verdict("keep", "fuzzy_low")
        return verdict("undecided", "direction_unknown", guards=guards)
    if guards:
        return verdict("undecided", "guard", guards=guards)
    if scores.fuzzy >= config.auto_merge_fuzzy:
        texts = (
            (fa.text, fb.text)
            if scores.mode == "full"
            else (
                fa.description_text,
                fb.description_text,
            )
        )
        if substituted(*texts):
            return verdict("undecided", "guard", guards=("wording",))
        return verdict("merge", "fuzzy_high")
    band = _merge_cosine(scores.mode, config)
    # A name is evidence only where its meaning is known: with names in full mode, the
    # cosine band needs both to name the same known kind of relation or role.
    known = scores.mode == "description" or same_known_kind(fa, fb)
    if band is not None and known and scores.cosine >= band:
        return verdict("merge", "embedding_high" if scores.mode == "full" else "description_high")
    if _low(scores, config):
        return verdict("keep", "fuzzy_low")
    return verdict("undecided", "band")
