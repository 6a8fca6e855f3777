"""Canary questions: pairs whose answer is certain without a model, asked like any other.

A run cannot trust a model it never measured: a weak or misconfigured model answers at
chance and its merges make the graph worse. So the run mixes into its questions a few
pairs the rules decided on hard evidence — a known-directed relation against its reversed
twin (different), two relations of one direction with the same description (same) —
drawn from the batch itself and asked as a ``relation_judge`` question of their block,
in a seeded order, with nothing that marks them. Their answers never change the output;
they are weighed, as they come, by a sequential test (``relmerge.decide.sequential``)
that trusts or stops the model.

This module is pure (no I/O but the one ask): which pairs are canaries and their seeded
order. Where they are asked and what distrust undoes is the run's
(``relmerge.run.canaries``), the store merge's and the judge's (``relmerge.judge``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.ask import ask_judge
from relmerge.decide.retry import Attempts, GroupFailed
from relmerge.decide.tiers import PairDecision
from relmerge.model import EntityContext
from relmerge.normalize import normalize_description
from relmerge.providers.base import LanguageModel
from relmerge.units import Unit

Expected = Literal["merge", "keep_both"]
PER_BLOCK = 2  # candidates a block offers at most (one of each kind)
PER_CHUNK = 64  # candidates a chunk carries at most


@dataclass(frozen=True)
class Canary:
    """One certain pair, ready to be asked: its two records as the block shows them, the
    block's entities and the answer the evidence gives. ``key`` seeds its order."""

    records: tuple[dict[str, Any], dict[str, Any]]
    entities: tuple[EntityContext, EntityContext]
    expected: Expected
    key: str


def seed_of(*parts: object) -> int:
    """A stable integer from ``parts`` (JSON): the same batch gives the same canaries."""
    data = orjson.dumps(parts, option=orjson.OPT_SORT_KEYS, default=str)
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big")


def certain(units: Sequence[Unit], pair: PairDecision) -> Expected | None:
    """The answer hard evidence gives about ``pair``, or None when the rules only judged
    (or a person, or an earlier split, said otherwise)."""
    if pair.verdict == "keep" and pair.hard and pair.tier == "direction":
        return "keep_both"  # a known-directed relation against its reversed twin
    if pair.verdict == "keep":
        return None
    a, b = units[pair.a].relation, units[pair.b].relation
    same_way = (a.source_entity_id, a.target_entity_id) == (b.source_entity_id, b.target_entity_id)
    text = normalize_description(a.description)
    if same_way and len(text) >= 20 and text == normalize_description(b.description):
        return "merge"  # the same sentence between the same two entities, one way
    return None


def block_candidates(
    units: Sequence[Unit],
    pairs: Sequence[PairDecision],
    record: Callable[[int], dict[str, Any]],
    entities: tuple[EntityContext, EntityContext],
) -> list[Canary]:
    """At most one canary of each answer from one block (``record``: a unit as the
    block's questions show it), chosen by a seed of the block's content."""
    chosen: dict[str, tuple[int, Canary]] = {}
    for pair in pairs:
        expected = certain(units, pair)
        if expected is None:
            continue
        first, second = record(pair.a), record(pair.b)
        key = f"{first['relation_id']}|{second['relation_id']}"
        rank = seed_of("canary", key)
        if rank % 2:  # the order the model sees them in, by the pair's own seed
            first, second = second, first
        held = chosen.get(expected)
        if held is None or rank < held[0]:
            chosen[expected] = (rank, Canary((first, second), entities, expected, key))
    return [canary for _, canary in sorted(chosen.values(), key=lambda item: item[0])]


def pick(candidates: Sequence[Canary], count: int, seed: object) -> list[Canary]:
    """``count`` of ``candidates`` in a seeded order, alternating answers where it can
    (a model that always says one thing must not pass on a one-sided sample)."""
    ranked = sorted(candidates, key=lambda c: seed_of(seed, c.key))
    keeps = [c for c in ranked if c.expected == "keep_both"]
    merges = [c for c in ranked if c.expected == "merge"]
    out: list[Canary] = []
    while len(out) < count and (keeps or merges):
        for side in (keeps, merges):
            if side and len(out) < count:
                out.append(side.pop(0))
    return out


async def ask_canary(
    llm: LanguageModel, canary: Canary, config: DeduplicateRelationsConfig
) -> bool | None:
    """Whether the model answered ``canary`` right (None: no valid answer, not counted).
    One request, as the first attempt of a real pairwise question is sent."""
    first, second = canary.records
    try:
        outcome, _ = await ask_judge(llm, [first], second, canary.entities, config, Attempts(1))
    except GroupFailed:
        return None
    return outcome.verdict == canary.expected
