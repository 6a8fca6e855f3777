"""A block as a self-contained job: scored and decided the same way wherever it runs.

A :class:`BlockJob` holds everything one block needs (its units, their features, the
description and name vectors, the entity context), so it can be decided in this process
or shipped to another one and give the same :class:`BlockResult`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations, product

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.block import BlockDecider, BlockResult
from relmerge.decide.features import RelationFeatures
from relmerge.decide.pack import Packer, Ticket
from relmerge.decide.scores import BlockFuzzy, BlockScores, Vectors
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
    lines: Mapping[int, Sequence[int]] | None = None,
    fuzzy: BlockFuzzy | None = None,
) -> list[PairDecision]:
    """The tier verdict of each pair (a < b) of ``relations`` (rows of the vectors): the
    one place where a pair is scored, for a block of a batch and for the judge alike.

    ``lines`` (a merge into a store): for a stored relation whose description was joined
    from several lines, the rows (after the relations' own) of those lines as relations
    of their own. A pair with one is scored against the whole and against each line, as
    one run scores a record against each member (see :func:`best_line`). ``fuzzy``: the
    rows' fuzzy ratios, when they were computed already."""
    scores = BlockScores(features, descriptions, names, fuzzy)

    def one(a: int, b: int, ra: int, rb: int) -> PairDecision:
        return decide_pair(
            a,
            b,
            (features[ra], features[rb]),
            orientation(relations[a], relations[b]),
            scores.pair(ra, rb),
            config,
            (a, b) in known,
        )

    if not lines:
        return [one(a, b, a, b) for a, b in pairs]
    decided = []
    for a, b in pairs:
        rows_a, rows_b = [a, *lines.get(a, ())], [b, *lines.get(b, ())]
        decided.append(best_line([one(a, b, ra, rb) for ra, rb in product(rows_a, rows_b)]))
    return decided


def best_line(decisions: Sequence[PairDecision]) -> PairDecision:
    """One verdict from a pair's verdicts against a stored relation's whole description
    (first) and each of its lines: a hard keep on any of them binds (precision first);
    else the strongest merge (a line states the same fact, as the member it came from
    would have shown in one run); else a question; else the whole's keep."""
    hard = next((d for d in decisions if d.verdict == "keep" and d.hard), None)
    if hard is not None:
        return hard
    merges = [d for d in decisions if d.verdict == "merge"]
    if merges:
        return max(merges, key=lambda d: d.scores["fuzzy"] / 100 + d.scores["cosine"])
    return next((d for d in decisions if d.verdict == "undecided"), decisions[0])


@dataclass
class BlockJob:
    """One block: ``units`` in block order, with their ``features``, description vectors
    (``descriptions``) and name vectors (``names``) as rows; ``known`` holds the local
    pairs (a < b) an earlier decision split, ``entities`` the block's (source, target).
    ``lines``: a stored relation's description lines, as rows after the units' own (see
    :func:`score_pairs`; a merge into a store only)."""

    units: list[Unit]
    features: list[RelationFeatures]
    descriptions: Vectors
    names: Vectors
    known: frozenset[tuple[int, int]]
    entities: tuple[EntityContext, EntityContext]
    lines: dict[int, list[int]] = field(default_factory=dict)
    fuzzy: BlockFuzzy | None = None  # computed already (the two-stage embedding's check)

    @property
    def symmetric(self) -> list[bool]:
        return [feature.symmetric for feature in self.features[: len(self.units)]]

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
        job.lines,
        job.fuzzy,
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
        packer = Packer(decider.llm, config, decider.limit, len(jobs), lambda: decider.canaries_on)

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
