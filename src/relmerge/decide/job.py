"""A block as a self-contained job: scored and decided the same way wherever it runs.

A :class:`BlockJob` holds everything one block needs (its units, their features, the
description and name vectors, the entity context), so it can be decided in this process
or shipped to another one and give the same :class:`BlockResult`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.block import BlockDecider, BlockResult
from relmerge.decide.features import RelationFeatures
from relmerge.decide.pack import Packer, Ticket
from relmerge.decide.scores import BlockScores, Vectors
from relmerge.decide.tiers import Orientation, PairDecision, decide_pair
from relmerge.model import EntityContext, ExtractedRelation
from relmerge.units import Unit


def orientation(a: ExtractedRelation, b: ExtractedRelation) -> Orientation:
    """Same direction, reversed, or not even the same two entities."""
    ends_a = (a.source_entity_id, a.target_entity_id)
    ends_b = (b.source_entity_id, b.target_entity_id)
    if ends_a == ends_b:
        return "same"
    return "reversed" if ends_a == ends_b[::-1] else "other"


def score_pairs(
    relations: list[ExtractedRelation],
    features: list[RelationFeatures],
    descriptions: Vectors,
    names: Vectors,
    pairs: list[tuple[int, int]],
    config: DeduplicateRelationsConfig,
    known: frozenset[tuple[int, int]] = frozenset(),
) -> list[PairDecision]:
    """The tier verdict of each pair (a < b) of ``relations`` (rows of the vectors): the
    one place where a pair is scored, for a block of a batch and for the judge alike."""
    scores = BlockScores(features, descriptions, names)
    return [
        decide_pair(
            a,
            b,
            (features[a], features[b]),
            orientation(relations[a], relations[b]),
            scores.pair(a, b),
            config,
            (a, b) in known,
        )
        for a, b in pairs
    ]


@dataclass
class BlockJob:
    """One block: ``units`` in block order, with their ``features``, description vectors
    (``descriptions``) and name vectors (``names``) as rows; ``known`` holds the local
    pairs (a < b) an earlier decision split, ``entities`` the block's (source, target)."""

    units: list[Unit]
    features: list[RelationFeatures]
    descriptions: Vectors
    names: Vectors
    known: frozenset[tuple[int, int]]
    entities: tuple[EntityContext, EntityContext]

    @property
    def symmetric(self) -> list[bool]:
        return [feature.symmetric for feature in self.features]

    @property
    def pair_count(self) -> int:
        return len(self.units) * (len(self.units) - 1) // 2


def score_block(job: BlockJob, config: DeduplicateRelationsConfig) -> list[PairDecision]:
    """The tier verdict of every pair of the block (the CPU-heavy part: fuzzy scores)."""
    return score_pairs(
        [unit.relation for unit in job.units],
        job.features,
        job.descriptions,
        job.names,
        list(combinations(range(len(job.units)), 2)),
        config,
        job.known,
    )


async def decide_block(
    job: BlockJob, decider: BlockDecider, ticket: Ticket | None = None
) -> BlockResult:
    """Score the block's pairs, then cluster and ask (``decider``) what the tiers left;
    ``ticket``: its first question goes to the chunk's packer (``decide.pack``)."""
    pairs = score_block(job, decider.config)
    return await decider.decide(job.units, pairs, job.entities, job.symmetric, ticket)


async def decide_blocks(
    jobs: Sequence[BlockJob], decider: BlockDecider, on_done: Callable[[int], None]
) -> list[BlockResult]:
    """Every block of ``jobs``, concurrently on this event loop; results in the order of
    ``jobs``, whatever order they end in (``on_done`` hears of each as it ends).

    A job is built when its block starts (``jobs`` may be lazy): blocks that never wait
    for an LLM are decided one after the other, and only the block being decided holds
    its vectors. The decider's semaphore bounds the LLM requests in flight. With
    ``llm_pack_tokens``, the blocks' first questions are packed (``decide.pack``)."""
    config = decider.config
    packer = None
    if config.llm_pack_tokens > 0 and decider.llm.available and len(jobs) > 1:
        packer = Packer(decider.llm, config, decider.limit, len(jobs))

    async def one(index: int) -> BlockResult:
        ticket = packer.ticket(index) if packer is not None else None
        try:
            result = await decide_block(jobs[index], decider, ticket)
        finally:
            if ticket is not None:
                ticket.release()
        on_done(1)
        return result

    try:
        return list(await asyncio.gather(*(one(index) for index in range(len(jobs)))))
    finally:
        if packer is not None:
            packer.close()
