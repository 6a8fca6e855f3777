"""The semantic stage (seeds 000 + 001): embed → blocks → the kernel decides → merged units.

A thin driver: it embeds descriptions and names, cuts the chunk into blocks, has the
kernel decide them (``relmerge.decide.job.decide_blocks``: concurrently on this event
loop), and turns the clusters into merged units. Where the chunk itself is worked is the
engine's business (``relmerge.engines``), never the stage's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, overload

import numpy as np

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.block import BlockDecider, BlockResult, cluster_lead
from relmerge.decide.canary import Canary
from relmerge.decide.features import RelationFeatures, relation_features
from relmerge.decide.job import BlockJob, decide_blocks
from relmerge.decide.lexicon import lexicon_for
from relmerge.decide.memory import Remembered
from relmerge.decide.merged import DESCRIPTION_SEPARATOR, rule_fields
from relmerge.decide.scores import BlockFuzzy, Vectors
from relmerge.decide.text import embedding_text
from relmerge.model import (
    Decision,
    EntityContext,
    ExtractedRelation,
    IssueResolution,
    IssueSubject,
    StepIssue,
)
from relmerge.normalize import exact_key
from relmerge.providers.base import LanguageModel
from relmerge.providers.embedding import EmbeddingModel, first_stage_of
from relmerge.stages.identical import holds_pinned
from relmerge.stages.semantic.blocking import BlockKey, block_pair_counts, make_blocks
from relmerge.stages.semantic.neighbours import ReportSink
from relmerge.stages.semantic.text import (
    RelationRows,
    UnitVectors,
    embed_units,
    wanted_texts,
)
from relmerge.stages.semantic.two_stage import (
    EmbeddedCounts,
    combined,
    distinct,
    embed_pass,
    embedded_counts,
    settle,
    split_units,
)
from relmerge.units import Originals, Unit, merge_units

# Two units by their members (input indices): a pair an earlier decision kept apart.
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
    merge_count: int = 0  # merges across exact keys (semantic merges)
    exact_merge_count: int = 0  # merges within an exact key decided here (see _count_merges)
    human_merge_count: int = 0  # of both, those a person's answer made
    human_exact_merge_count: int = 0  # of those, counted in exact_merge_count
    llm_needed_block_count: int = 0  # blocks with pairs left for an LLM or a person
    llm_needed_tiers: dict[str, int] = field(default_factory=dict)
    llm_needed_without_names: int = 0
    pair_counts: dict[str, int] = field(default_factory=dict)
    tier_counts: dict[str, int] = field(default_factory=dict)
    llm_questions: int = 0  # requests the blocks sent the LLM
    canaries: list[Canary] = field(default_factory=list)  # certain pairs the blocks offer
    canary_answers: list[bool | None] = field(default_factory=list)  # mixed in, in order
    bare_questions: int = 0  # requests that carried no canary


@dataclass
class PreparedUnits:
    """Units with their blocks, and for the units that need them, features, description
    vectors and name vectors: ready to be decided.

    A unit alone in its block is never scored, so it gets no features, and vectors only
    when the cross-block report may compare it (see ``partners.report_candidates``).
    """

    units: Sequence[Unit]
    blocks: dict[BlockKey, list[int]]
    features: Mapping[int, RelationFeatures]
    descriptions: UnitVectors
    names: UnitVectors
    embedded: list[bool]  # the units whose vectors the cross-block report may compare
    lines: StoredLines | None = None  # a merge into a store: stored relations' lines
    fuzzy: dict[int, BlockFuzzy] = field(default_factory=dict)  # by a block's first unit
    counts: EmbeddedCounts = field(default_factory=EmbeddedCounts)

    @property
    def embedded_count(self) -> int:
        return sum(self.embedded)


@dataclass
class StoredLines:
    """The description lines of stored relations (a merge into a store), each as a
    relation of its own: a stored relation's description joins its members' (the "nothing
    lost" rule), and a new relation is scored against each line as well, as one run
    scores it against each member. ``rows``: unit index -> its lines' rows here."""

    rows: dict[int, list[int]]
    features: list[RelationFeatures]
    descriptions: Vectors
    names: Vectors


def description_lines(relation: ExtractedRelation) -> list[ExtractedRelation]:
    """A relation's description lines as relations (none when it has only one)."""
    parts = [p.strip() for p in relation.description.split(DESCRIPTION_SEPARATOR)]
    parts = [p for p in parts if p]
    if len(parts) < 2:
        return []
    return [relation.model_copy(update={"description": part}) for part in parts]


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
        memory: Remembered | None = None,
        report: ReportSink | None = None,
        shared_names: frozenset[str] = frozenset(),
        on_texts: Callable[[int], None] = lambda n: None,
        on_embedded: Callable[[int], None] = lambda n: None,
        pinned: frozenset[int] = frozenset(),
        canaries: bool = True,
    ) -> None:
        """``known_distinct``: pairs of units (each a unit's ``members``, the input indices
        it stands for) that an earlier decision kept apart: a hard keep for the tiers and
        the LLM alike (tier ``known_distinct``), so they are never asked again. A batch
        run has none; a merge into a store passes the stored pairs known to differ.
        ``report`` collects the units for the cross-block entity report (run after all
        chunks of blocks); ``shared_names`` are the batch's names that prove nothing
        (see ``relmerge.decide.scores``). Progress: ``on_block_done`` hears of blocks of
        two or more records settled (decided, or merged whole by the exact stage);
        ``on_texts`` how many distinct texts a chunk embeds, ``on_embedded`` how many
        are done. ``pinned``: input indices of stored relations (a merge into a store):
        two units that both hold one are a hard keep, never decided again. ``canaries``:
        whether the run's verdict still wants canaries when the stage starts."""
        self.config = config
        self.pinned = pinned
        self.llm = llm
        self.embedder = embedder
        self.originals = originals
        self.entities = entities or {}
        self.known_distinct = known_distinct or set()
        self.on_block_done = on_block_done
        self.memory = memory
        self.lexicon = lexicon_for(config)
        self.report = report
        self.shared_names = shared_names
        self.on_texts = on_texts
        self.on_embedded = on_embedded
        self._decider = BlockDecider(
            config, llm, originals, asyncio.Semaphore(config.concurrency), memory, canaries
        )

    def _entity(self, entity_id: str, name: str) -> EntityContext:
        known = self.entities.get(entity_id)
        return known if known is not None else EntityContext(entity_id, name)

    async def run(self, units: Sequence[Unit]) -> SemanticOutcome:
        return await self.decide(await self.prepare(units))

    async def prepare(
        self, units: Sequence[Unit], report_needs: Callable[[Unit], bool] | None = None
    ) -> PreparedUnits:
        """Embed and describe ``units``: the CPU-heavy part, which needs no decision (the
        features are computed while the embedding runs in its threads).

        Units in blocks of two or more are embedded and described; a unit alone in its
        block is embedded only for the cross-block report, when ``report_needs`` says it
        may be compared there (None: whenever a report is collected).
        """
        blocks = make_blocks(units)
        in_multi = [False] * len(units)
        for members in blocks.values():
            if len(members) > 1:
                for i in members:
                    in_multi[i] = True
        if self.report is None:
            reported = [False] * len(units)
        elif report_needs is None:
            reported = [True] * len(units)
        else:
            reported = [report_needs(u) for u in units]
        embedded = [multi or seen for multi, seen in zip(in_multi, reported, strict=True)]
        limit = self.config.embedding_description_chars
        texts = [embedding_text(unit.relation, limit) for unit in units]
        names = [unit.relation.name for unit in units]
        first = self._first_stage()
        if first is not None:
            return await self._prepare_split(units, blocks, in_multi, reported, texts, names, first)
        self.on_texts(len(wanted_texts(texts, embedded)) + len(wanted_texts(names, embedded)))
        embedding = asyncio.ensure_future(
            embed_units(texts, self.embedder, embedded, self.on_embedded)
        )
        await asyncio.sleep(0)  # the embedding starts (in threads) before the features
        try:
            features = self._features(units, in_multi)
        except BaseException:
            embedding.cancel()
            raise
        descriptions = await embedding
        # Names repeat a lot ("related", "下辖"): each distinct name is embedded once.
        name_vectors = await embed_units(names, self.embedder, embedded, self.on_embedded)
        counts = EmbeddedCounts(for_rules=len(descriptions.matrix) + len(name_vectors.matrix))
        lines = await self._stored_lines(units, in_multi, name_vectors) if self.pinned else None
        return PreparedUnits(
            units, blocks, features, descriptions, name_vectors, embedded, lines, counts=counts
        )

    def _first_stage(self) -> EmbeddingModel | None:
        """The embedder's cheap first stage, where the split applies (see ``two_stage``)."""
        answered = self.memory is not None and len(self.memory) > 0
        if not self.config.two_stage_embedding or self.pinned or answered:
            return None
        return first_stage_of(self.embedder)

    def _features(
        self, units: Sequence[Unit], in_multi: Sequence[bool]
    ) -> dict[int, RelationFeatures]:
        return {
            i: relation_features(units[i].relation, self.lexicon, self.shared_names)
            for i, multi in enumerate(in_multi)
            if multi
        }

    async def _prepare_split(
        self,
        units: Sequence[Unit],
        blocks: dict[BlockKey, list[int]],
        in_multi: Sequence[bool],
        reported: Sequence[bool],
        texts: Sequence[str],
        names: Sequence[str],
        first: EmbeddingModel,
    ) -> PreparedUnits:
        """Features and the split first; then the first stage, which may settle some
        blocks; then the full model for what is left (see ``two_stage``)."""
        features = self._features(units, in_multi)
        split = split_units(units, blocks, features, self.config, reported)
        self.on_texts(distinct(texts, names, split.first) + distinct(texts, names, split.full))
        cheap = await embed_pass(texts, names, split.first, first, self.on_embedded)
        before = list(split.full)
        settled = settle(split, *cheap, self.config)
        added = [now and not was for now, was in zip(split.full, before, strict=True)]
        if any(added):
            self.on_texts(distinct(texts, names, added))
        whole = await embed_pass(texts, names, split.full, self.embedder, self.on_embedded)
        counts = embedded_counts(texts, names, split, settled)
        descriptions = combined(whole[0], cheap[0])
        name_vectors = combined(whole[1], cheap[1])
        # Only the relations it may compare go to the report: their vectors are full.
        return PreparedUnits(
            units,
            blocks,
            features,
            descriptions,
            name_vectors,
            list(reported),
            fuzzy=split.fuzzy,
            counts=counts,
        )

    async def _stored_lines(
        self, units: Sequence[Unit], in_multi: Sequence[bool], names: UnitVectors
    ) -> StoredLines | None:
        """The lines of the stored relations that share a block with a new one."""
        rows: dict[int, list[int]] = {}
        relations: list[ExtractedRelation] = []
        name_rows: list[int] = []
        for index, unit in enumerate(units):
            if not (in_multi[index] and holds_pinned(unit, self.pinned)):
                continue
            found = description_lines(unit.relation)
            rows[index] = list(range(len(relations), len(relations) + len(found)))
            relations.extend(found)
            name_rows.extend([index] * len(found))
        if not relations:
            return None
        limit = self.config.embedding_description_chars
        texts = [embedding_text(relation, limit) for relation in relations]
        vectors = await embed_units(texts, self.embedder)
        features = [relation_features(r, self.lexicon, self.shared_names) for r in relations]
        return StoredLines(rows, features, vectors[range(len(texts))], names[name_rows])

    async def decide(self, prepared: PreparedUnits) -> SemanticOutcome:
        """Blocks → scores → tiers → LLM → merged units."""
        units, features = prepared.units, prepared.features
        outcome = SemanticOutcome(units=[])
        blocks = prepared.blocks
        outcome.pair_counts = block_pair_counts(blocks)
        multi = [members for members in blocks.values() if len(members) > 1]
        # A block of several records the exact stage merged whole has nothing left to decide
        self.on_block_done(
            sum(1 for m in blocks.values() if len(m) == 1 and len(units[m[0]].members) > 1)
        )
        jobs = LazyJobs(
            multi,
            lambda members: self._job(units, members, prepared),
        )
        results = await decide_blocks(jobs, self._decider, self.on_block_done)
        final: list[Unit] = [units[members[0]] for members in blocks.values() if len(members) == 1]
        for members, result in zip(multi, results, strict=True):
            symmetric = [features[i].symmetric for i in members]
            final.extend(self._apply(units, members, result, outcome, symmetric))
        outcome.units = sorted(final, key=lambda unit: unit.first)
        if self.report is not None:
            rows = RelationRows(prepared.descriptions, prepared.names)
            self.report.add(units, rows, prepared.embedded)
        for decision in outcome.decisions:
            outcome.tier_counts[decision.tier] = outcome.tier_counts.get(decision.tier, 0) + 1
        return outcome

    def _job(self, units: Sequence[Unit], members: list[int], prepared: PreparedUnits) -> BlockJob:
        """Everything the block needs to be decided (see ``decide.job``)."""
        local = [units[i] for i in members]
        known: frozenset[tuple[int, int]] = frozenset()
        if self.known_distinct or self.pinned:  # usually neither: no walk over the pairs
            stored = [holds_pinned(unit, self.pinned) for unit in local]
            known = frozenset(
                (a, b)
                for a, b in combinations(range(len(local)), 2)
                if (stored[a] and stored[b])
                or frozenset((local[a].members, local[b].members)) in self.known_distinct
            )
        first = local[0].relation
        entities = (
            self._entity(first.source_entity_id, first.source_entity_name),
            self._entity(first.target_entity_id, first.target_entity_name),
        )
        job = BlockJob(
            local,
            [prepared.features[i] for i in members],
            prepared.descriptions[members],
            prepared.names[members],
            known,
            entities,
            fuzzy=prepared.fuzzy.get(members[0]),
        )
        if prepared.lines is not None:
            _add_lines(job, members, prepared.lines)
        return job

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
        outcome.llm_needed_block_count += result.llm_needed_pairs > 0
        for tier, count in result.llm_needed_tiers.items():
            outcome.llm_needed_tiers[tier] = outcome.llm_needed_tiers.get(tier, 0) + count
        outcome.llm_needed_without_names += result.llm_needed_without_names
        outcome.llm_questions += result.questions
        outcome.canaries.extend(result.canaries)
        outcome.canary_answers.extend(result.canary_answers)
        outcome.bare_questions += result.bare_questions
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
            inside = set(cluster)
            human = [(local[a], local[b]) for a, b in result.human_joins if a in inside]
            _count_merges(cluster_units, outcome, human)
            lead = local[cluster_lead(cluster, symmetric)]
            written = result.fields.get(cluster[0])
            if written is not None and written.members == frozenset(cluster):
                fields = written.fields  # an LLM merged exactly these, seeing them whole
            else:
                members = sorted(i for unit in cluster_units for i in unit.members)
                fields = rule_fields([self.originals[i] for i in members], lead.relation)
            merged.append(merge_units(cluster_units, self.originals, fields, lead))
        return merged


def _add_lines(job: BlockJob, members: Sequence[int], lines: StoredLines) -> None:
    """The stored relations' lines of the block, as rows after its units' own."""
    extra = [(local, lines.rows[i]) for local, i in enumerate(members) if lines.rows.get(i)]
    if not extra:
        return
    start = len(job.units)
    picked: list[int] = []
    for local, rows in extra:
        job.lines[local] = list(range(start + len(picked), start + len(picked) + len(rows)))
        picked.extend(rows)
    job.features = [*job.features, *(lines.features[r] for r in picked)]
    job.descriptions = np.concatenate([job.descriptions, lines.descriptions[picked]])
    job.names = np.concatenate([job.names, lines.names[picked]])


def _count_merges(
    cluster: Sequence[Unit],
    outcome: SemanticOutcome,
    human: Sequence[tuple[Unit, Unit]] = (),
) -> None:
    """Count a cluster's merges: those within one exact key are exact merges, wherever they
    were decided (with the semantic stage on, an exact-key group that needs an LLM is
    decided inside its block's request), the rest are semantic merges. A cluster of n units
    whose exact keys form k groups makes n - k exact merges and k - 1 semantic ones.

    ``human``: the joins a person's answers made in the cluster (each one merge). They
    stay inside those two counts (where they fall: within an exact key or across) and are
    also counted apart, with how many of them are exact merges — a join of two units of
    one key is, as far as the cluster's exact merges go; the rest are semantic ones, so
    the merges the rules and the LLM made in each count are never negative."""
    keys = len({exact_key(unit.relation) for unit in cluster})
    exact, semantic = len(cluster) - keys, keys - 1
    outcome.exact_merge_count += exact
    outcome.merge_count += semantic
    if human:
        same = sum(1 for a, b in human if exact_key(a.relation) == exact_key(b.relation))
        human_exact = min(same, exact)
        human_semantic = min(len(human) - human_exact, semantic)
        human_exact = len(human) - human_semantic  # at most ``exact``: joins <= n - 1
        outcome.human_merge_count += len(human)
        outcome.human_exact_merge_count += human_exact
