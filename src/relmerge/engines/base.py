"""A block as a self-contained job, and the engine protocol that decides many of them.

A :class:`BlockJob` holds everything one block needs (its units, their features and
vectors, the entity context), so it can be decided in this process or shipped to another
one and give the same :class:`BlockResult`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Protocol

from relmerge.config import DeduplicateRelationsConfig
from relmerge.prompts.context import EntityContext
from relmerge.providers.embedding import Vectors
from relmerge.stages.semantic.block import BlockDecider, BlockResult
from relmerge.stages.semantic.features import RelationFeatures
from relmerge.stages.semantic.tiers import PairDecision, block_scores, decide_pair
from relmerge.stages.units import Unit


@dataclass
class BlockJob:
    """One block: ``units`` in block order, with their ``features``, text ``vectors`` and
    name vectors (``names``) as rows; ``known`` holds the local pairs (a < b) an earlier
    decision split, ``entities`` the block's (source, target) context."""

    units: list[Unit]
    features: list[RelationFeatures]
    vectors: Vectors
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
    local = job.units
    fuzzy, cosine = block_scores([feature.text for feature in job.features], job.vectors)
    name_cosine = job.names @ job.names.T
    pairs: list[PairDecision] = []
    for a, b in combinations(range(len(local)), 2):
        ra, rb = local[a].relation, local[b].relation
        same_direction = (ra.source_entity_id, ra.target_entity_id) == (
            rb.source_entity_id,
            rb.target_entity_id,
        )
        pairs.append(
            decide_pair(
                a,
                b,
                (job.features[a], job.features[b]),
                same_direction,
                float(fuzzy[a, b]),
                float(cosine[a, b]),
                float(name_cosine[a, b]),
                config,
                (a, b) in job.known,
            )
        )
    return pairs


async def decide_block(job: BlockJob, decider: BlockDecider) -> BlockResult:
    """Score the block's pairs, then cluster and ask (``decider``) what the tiers left."""
    pairs = score_block(job, decider.config)
    return await decider.decide(job.units, pairs, job.entities, job.symmetric)


class BlockEngine(Protocol):
    """Decides the blocks; results are in the order of ``jobs``, whatever order they end."""

    async def decide_blocks(
        self,
        decider: BlockDecider,
        jobs: Sequence[BlockJob],
        on_done: Callable[[int], None],
    ) -> list[BlockResult]: ...


class LocalEngine:
    """Every block in this process, concurrently on one event loop (the default)."""

    async def decide_blocks(
        self,
        decider: BlockDecider,
        jobs: Sequence[BlockJob],
        on_done: Callable[[int], None],
    ) -> list[BlockResult]:
        async def one(index: int) -> BlockResult:
            # The job is built when its block starts (``jobs`` may be lazy): blocks that
            # never wait for an LLM are decided one after the other, and only the block
            # being decided holds its vectors.
            result = await decide_block(jobs[index], decider)
            on_done(1)
            return result

        return list(await asyncio.gather(*(one(index) for index in range(len(jobs)))))
