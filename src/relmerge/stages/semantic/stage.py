"""The semantic stage (seeds 000 + 001): blocks → scores → tiers → LLM → merged units."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from relmerge.config import DeduplicateRelationsConfig
from relmerge.engines.base import BlockEngine, BlockJob, LocalEngine
from relmerge.model import Decision, IssueResolution, IssueSubject, StepIssue
from relmerge.prompts.context import EntityContext
from relmerge.providers.base import LanguageModel
from relmerge.providers.embedding import EmbeddingModel, Vectors
from relmerge.review.memory import AnswerMemory
from relmerge.stages.semantic.block import BlockDecider, BlockResult, cluster_lead
from relmerge.stages.semantic.blocking import block_pair_counts, make_blocks
from relmerge.stages.semantic.features import RelationFeatures, relation_features
from relmerge.stages.semantic.lexicon import Lexicon, TermSet, load_lexicon
from relmerge.stages.semantic.neighbours import EntityReport
from relmerge.stages.semantic.text import UnitVectors, embed_units, embedding_text
from relmerge.stages.units import Originals, Unit, merge_units

Pair = frozenset[tuple[int, ...]]


@dataclass
class SemanticOutcome:
    units: list[Unit]
    decisions: list[Decision] = field(default_factory=list)
    issues: list[StepIssue] = field(default_factory=list)
    clarifications: list[dict[str, Any]] = field(default_factory=list)
    rounds: int = 0
    failed_block_count: int = 0
    llm_needed_pair_count: int = 0
    merge_count: int = 0
    pair_counts: dict[str, int] = field(default_factory=dict)
    tier_counts: dict[str, int] = field(default_factory=dict)


def _lexicon(config: DeduplicateRelationsConfig) -> Lexicon:
    lexicon = load_lexicon()
    if not config.symmetric_relations:
        return lexicon
    extra = TermSet([*lexicon.symmetric.terms, *config.symmetric_relations])
    return replace(lexicon, symmetric=extra, name_cache={})


def _deterministic_fields(units: Sequence[Unit], lead: Unit) -> dict[str, Any]:
    """Fields of a rule-based merge: the ``lead``'s (see ``cluster_lead``), with the
    attributes of every member, first seen wins."""
    representative = lead.relation
    attributes: dict[str, str] = {}
    for unit in sorted(units, key=lambda u: u.first):
        for key, value in unit.relation.attributes.items():
            attributes.setdefault(key, value)
    return {
        "type": representative.type,
        "name": representative.name,
        "description": representative.description,
        "attributes": attributes,
    }


@dataclass
class PreparedUnits:
    """Units with their features, text vectors and name vectors (rows of ``name_matrix``
    picked by ``name_index``), ready to be decided."""

    units: Sequence[Unit]
    features: list[RelationFeatures]
    vectors: UnitVectors
    name_matrix: Vectors
    name_index: npt.NDArray[np.intp]


class LazyJobs(Sequence[BlockJob]):
    """The blocks' jobs, each built when asked for: a job holds copies of its block's
    vectors, and building them all up front doubled the stage's memory at scale."""

    def __init__(self, blocks: Sequence[list[int]], build: Callable[[list[int]], BlockJob]) -> None:
        self.blocks = blocks
        self.build = build

    def __len__(self) -> int:
        return len(self.blocks)

    @overload
    def __getitem__(self, index: int) -> BlockJob: ...

    @overload
    def __getitem__(self, index: slice) -> list[BlockJob]: ...

    def __getitem__(self, index: int | slice) -> BlockJob | list[BlockJob]:
        if isinstance(index, slice):
            return [self.build(members) for members in self.blocks[index]]
        return self.build(self.blocks[index])


class SemanticStage:
    def __init__(
        self,
        config: DeduplicateRelationsConfig,
        llm: LanguageModel,
        embedder: EmbeddingModel,
        originals: Originals,
        entities: Mapping[str, EntityContext] | None = None,
        known_distinct: set[Pair] | None = None,
        on_block_done: Callable[[int], None] = lambda n: None,
        memory: AnswerMemory | None = None,
        engine: BlockEngine | None = None,
        report: EntityReport | None = None,
    ) -> None:
        """``engine`` decides the blocks (default: :class:`LocalEngine`, this process);
        ``report`` collects the units for the cross-block entity report (run after all
        chunks of blocks)."""
        self.config = config
        self.llm = llm
        self.embedder = embedder
        self.originals = originals
        self.entities = entities or {}
        self.known_distinct = known_distinct or set()
        self.on_block_done = on_block_done
        self.lexicon = _lexicon(config)
        self.engine: BlockEngine = engine or LocalEngine()
        self.report = report
        self._decider = BlockDecider(
            config, llm, originals, asyncio.Semaphore(config.concurrency), memory
        )

    def _entity(self, entity_id: str, name: str) -> EntityContext:
        known = self.entities.get(entity_id)
        return known if known is not None else EntityContext(entity_id, name)

    async def run(self, units: Sequence[Unit]) -> SemanticOutcome:
        return await self.decide(await self.prepare(units))

    async def prepare(self, units: Sequence[Unit]) -> PreparedUnits:
        """Embed and describe ``units``: the CPU-heavy part, which needs no decision (the
        features are computed while the embedding runs in its threads)."""
        texts = [
            embedding_text(unit.relation, self.config.embedding_description_chars) for unit in units
        ]
        embedding = asyncio.ensure_future(embed_units(texts, self.embedder))
        await asyncio.sleep(0)  # the embedding starts (in threads) before the features
        try:
            features = [relation_features(unit.relation, self.lexicon) for unit in units]
        except BaseException:
            embedding.cancel()
            raise
        vectors = await embedding
        # Names repeat a lot ("related", "下辖"): embed and keep each distinct name once.
        names = list(dict.fromkeys(unit.relation.name for unit in units))
        name_rows = {name: row for row, name in enumerate(names)}
        name_matrix = await self.embedder.embed(names)
        name_index = np.array([name_rows[unit.relation.name] for unit in units])
        return PreparedUnits(units, features, vectors, name_matrix, name_index)

    async def decide(self, prepared: PreparedUnits) -> SemanticOutcome:
        """Blocks → scores → tiers → LLM → merged units."""
        units, features, vectors = prepared.units, prepared.features, prepared.vectors
        outcome = SemanticOutcome(units=[])
        blocks = make_blocks(units)
        outcome.pair_counts = block_pair_counts(blocks)
        multi = [members for members in blocks.values() if len(members) > 1]
        jobs = LazyJobs(
            multi,
            lambda members: self._job(
                units,
                members,
                features,
                vectors,
                prepared.name_matrix[prepared.name_index[members]],
            ),
        )
        results = await self.engine.decide_blocks(self._decider, jobs, self.on_block_done)
        final: list[Unit] = [units[members[0]] for members in blocks.values() if len(members) == 1]
        for members, result in zip(multi, results, strict=True):
            symmetric = [features[i].symmetric for i in members]
            final.extend(self._apply(units, members, result, outcome, symmetric))
        outcome.units = sorted(final, key=lambda unit: unit.first)
        outcome.merge_count = len(units) - len(outcome.units)
        if self.report is not None:
            self.report.add(units, vectors)
        for decision in outcome.decisions:
            outcome.tier_counts[decision.tier] = outcome.tier_counts.get(decision.tier, 0) + 1
        return outcome

    def _job(
        self,
        units: Sequence[Unit],
        members: list[int],
        features: Sequence[RelationFeatures],
        vectors: UnitVectors,
        names: Vectors,
    ) -> BlockJob:
        """Everything the block needs to be decided anywhere (see ``engines.base``)."""
        local = [units[i] for i in members]
        known: frozenset[tuple[int, int]] = frozenset()
        if self.known_distinct:  # usually empty: then the driver never walks the pairs
            known = frozenset(
                (a, b)
                for a, b in combinations(range(len(local)), 2)
                if frozenset((local[a].members, local[b].members)) in self.known_distinct
            )
        first = local[0].relation
        entities = (
            self._entity(first.source_entity_id, first.source_entity_name),
            self._entity(first.target_entity_id, first.target_entity_name),
        )
        return BlockJob(
            local, [features[i] for i in members], vectors[members], names, known, entities
        )

    def _apply(
        self,
        units: Sequence[Unit],
        members: list[int],
        result: BlockResult,
        outcome: SemanticOutcome,
        symmetric: Sequence[bool],
    ) -> list[Unit]:
        local = [units[i] for i in members]
        outcome.decisions.extend(result.decisions)
        outcome.clarifications.extend(result.clarifications)
        outcome.rounds = max(outcome.rounds, result.rounds)
        outcome.llm_needed_pair_count += result.llm_needed_pairs
        if result.failure is not None:
            outcome.failed_block_count += 1
            first = local[0].relation
            outcome.issues.append(
                StepIssue(
                    subject=IssueSubject(
                        type="dedup_block",
                        id=f"{first.source_entity_name}|{first.target_entity_name}",
                    ),
                    code=result.failure.code,
                    severity="warning",
                    message=result.failure.reason,
                    resolution=IssueResolution(
                        action="kept_tier_decisions",
                        outcome="Pairs the LLM could not decide kept the rules' decision "
                        "(merged only where the rules merge).",
                    ),
                )
            )
        merged = []
        for cluster in result.clusters:
            cluster_units = [local[i] for i in cluster]
            lead = local[cluster_lead(cluster, symmetric)]
            fields = next((result.fields[i] for i in cluster if i in result.fields), None)
            merged.append(
                merge_units(
                    cluster_units,
                    self.originals,
                    fields or _deterministic_fields(cluster_units, lead),
                    lead,
                )
            )
        return merged
