"""The work of one chunk of whole blocks, wherever it runs.

    exact stage ─► (semantic stage on) embed ─► score and decide the blocks ─► final units

:func:`work_chunk` takes plain values (:class:`ChunkTask` and the run's
:class:`ChunkSettings`) and returns plain values (:class:`ChunkResult`): what the driver
writes (output relations as JSON, decisions, clarifications), adds up (counts, issues)
or keeps for after the last chunk (the cross-block report's entries). It writes nothing
itself. The local engine calls it in the driver; the worker-process and Ray engines on a
worker, whose LLM requests go through the driver's gateway. Blocks never span chunks, so a
chunk gives the same result wherever it is worked.

It is the order of the stages in a chunk, so it lives with the stages, below the engines
that run it and the run (``relmerge.run``) that picks an engine.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from relmerge.config import DeduplicateRelationsConfig
from relmerge.cputime import CpuMeter
from relmerge.decide.canary import PER_CHUNK, Canary, pick
from relmerge.decide.memory import Remembered
from relmerge.model import EntityContext, ExtractedRelation, StepIssue
from relmerge.progress import NoProgress, Progress, WorkedProgress, working_on
from relmerge.providers.base import LanguageModel
from relmerge.providers.embedding import EmbeddingModel
from relmerge.stages.exact import ExactOutcome, ExactStage
from relmerge.stages.semantic.blocking import add_pair_counts
from relmerge.stages.semantic.neighbours import ReportPart
from relmerge.stages.semantic.stage import SemanticOutcome, SemanticStage
from relmerge.units import Unit


class RecordedProgress(NoProgress):
    """Progress of a chunk worked away from the driver (a Ray task): what it advanced,
    how it corrected each phase's total and how long it worked in each phase, replayed
    by the driver when the result lands."""

    def __init__(self) -> None:
        self.advanced: dict[str, int] = {}
        self.totals: dict[str, int] = {}
        self.seconds: dict[str, float] = {}  # worked per phase (see ``progress.working``)
        self._since: dict[str, float] = {}

    def advance(self, stage: str, amount: int = 1) -> None:
        self.advanced[stage] = self.advanced.get(stage, 0) + amount

    def add_total(self, stage: str, amount: int) -> None:
        self.totals[stage] = self.totals.get(stage, 0) + amount

    def working(self, stage: str, busy: bool) -> None:
        now = time.perf_counter()
        if busy:
            self._since[stage] = now
        elif stage in self._since:
            worked = now - self._since.pop(stage)
            self.seconds[stage] = self.seconds.get(stage, 0.0) + worked

    def replay(self, progress: Progress) -> None:
        """The seconds first: the driver ends a phase whose total the advances reach."""
        if isinstance(progress, WorkedProgress):
            for stage, seconds in self.seconds.items():
                progress.worked(stage, seconds)
        for stage, amount in self.totals.items():
            progress.add_total(stage, amount)
        for stage, amount in self.advanced.items():
            progress.advance(stage, amount)


@dataclass(frozen=True)
class ChunkSettings:
    """What every chunk of a run shares (sent to each worker once)."""

    config: DeduplicateRelationsConfig
    entities: Mapping[str, EntityContext] = field(default_factory=dict)
    memory: Remembered | None = None
    shared_names: frozenset[str] = frozenset()
    semantic: bool = True  # the semantic stage runs (an embedder is given)
    report: bool = True  # the cross-block report collects this chunk's units


@dataclass
class ChunkTask:
    """One chunk: its input indices (input order) and relations, as objects or as their
    JSON (the spool's bytes travel without being parsed in the driver).
    ``report_needs``: the input indices whose unit the cross-block report may compare,
    so a unit alone in its block is embedded only if listed (None: every unit).
    ``pinned``: the input indices of relations already stored (a merge into a store):
    two of them are never merged nor judged against each other. ``canaries``: whether the
    run's verdict still wanted canaries when the chunk was handed out."""

    number: int
    indices: list[int]
    relations: list[ExtractedRelation] | list[bytes]
    report_needs: frozenset[int] | None = None
    pinned: frozenset[int] = frozenset()
    canaries: bool = True

    def originals(self) -> dict[int, ExtractedRelation]:
        parsed = [
            ExtractedRelation.model_construct(**orjson.loads(item))
            if isinstance(item, bytes)
            else item
            for item in self.relations
        ]
        return dict(zip(self.indices, parsed, strict=True))


@dataclass
class Tally:
    """The result counters of a chunk, or summed over chunks."""

    exact_merges: int = 0
    semantic_merges: int = 0
    human_merges: int = 0  # of the two above, those a person's answers made
    human_exact_merges: int = 0  # of those, counted in exact_merges
    failed: int = 0
    llm_needed_groups: int = 0
    llm_needed_pairs: int = 0
    llm_needed_blocks: int = 0
    llm_needed_tiers: dict[str, int] = field(default_factory=dict)
    llm_needed_without_names: int = 0
    exact_rounds: int = 0
    semantic_rounds: int = 0
    blocking: dict[str, int] = field(default_factory=dict)
    tiers: dict[str, int] = field(default_factory=dict)

    def add_exact(self, exact: ExactOutcome) -> None:
        self.exact_merges += exact.merge_count
        self.failed += exact.failed_group_count
        self.llm_needed_groups += exact.llm_needed_group_count
        self.exact_rounds = max(self.exact_rounds, exact.rounds)

    def add_semantic(self, semantic: SemanticOutcome) -> None:
        self.exact_merges += semantic.exact_merge_count
        self.semantic_merges += semantic.merge_count
        self.human_merges += semantic.human_merge_count
        self.human_exact_merges += semantic.human_exact_merge_count
        self.failed += semantic.failed_block_count
        self.llm_needed_pairs += semantic.llm_needed_pair_count
        self.llm_needed_blocks += semantic.llm_needed_block_count
        _add_counts(self.llm_needed_tiers, semantic.llm_needed_tiers)
        self.llm_needed_without_names += semantic.llm_needed_without_names
        self.semantic_rounds = max(self.semantic_rounds, semantic.rounds)
        add_pair_counts(self.blocking, semantic.pair_counts)
        for tier, count in semantic.tier_counts.items():
            self.tiers[tier] = self.tiers.get(tier, 0) + count

    def add(self, other: Tally) -> None:
        self.exact_merges += other.exact_merges
        self.semantic_merges += other.semantic_merges
        self.human_merges += other.human_merges
        self.human_exact_merges += other.human_exact_merges
        self.failed += other.failed
        self.llm_needed_groups += other.llm_needed_groups
        self.llm_needed_pairs += other.llm_needed_pairs
        self.llm_needed_blocks += other.llm_needed_blocks
        _add_counts(self.llm_needed_tiers, other.llm_needed_tiers)
        self.llm_needed_without_names += other.llm_needed_without_names
        self.exact_rounds = max(self.exact_rounds, other.exact_rounds)
        self.semantic_rounds = max(self.semantic_rounds, other.semantic_rounds)
        add_pair_counts(self.blocking, other.blocking)
        for tier, count in other.tiers.items():
            self.tiers[tier] = self.tiers.get(tier, 0) + count


def _add_counts(into: dict[str, int], counts: Mapping[str, int]) -> None:
    for key, count in counts.items():
        into[key] = into.get(key, 0) + count


@dataclass
class ChunkResult:
    """What one chunk gives the driver. ``outputs``: (members, relation id, relation
    JSON) per output relation, in order of first member. ``cpu``: CPU seconds per stage
    in the process that worked the chunk; ``node``: the Ray node it ran on ("" here)."""

    number: int
    outputs: list[tuple[tuple[int, ...], str, bytes]] = field(default_factory=list)
    exact_decisions: list[dict[str, Any]] = field(default_factory=list)
    semantic_decisions: list[dict[str, Any]] = field(default_factory=list)
    clarifications: list[dict[str, Any]] = field(default_factory=list)
    exact_issues: list[StepIssue] = field(default_factory=list)
    semantic_issues: list[StepIssue] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)
    report: ReportPart | None = None
    progress: RecordedProgress | None = None  # a worker's progress, for the driver
    texts_embedded: int = 0
    embedded_by: dict[str, int] = field(default_factory=dict)  # see two_stage.EmbeddedCounts
    cpu: dict[str, float] = field(default_factory=dict)
    wall: dict[str, float] = field(default_factory=dict)  # wall seconds per stage
    wall_s: float = 0.0
    node: str = ""
    invalid_answers: int = 0  # unusable LLM answers seen by a worker's model
    new_vectors: list[tuple[str, bytes]] = field(default_factory=list)  # for the run cache
    llm_questions: int = 0  # requests its blocks sent the LLM (canaries are earned by them)
    canaries: list[Canary] = field(default_factory=list)  # certain pairs, for the driver
    # The canaries mixed into its blocks' requests, as answered (None: unsure; the
    # verdict heard each as it came), and the requests that carried none (they earn
    # canaries asked on their own).
    canary_answers: list[bool | None] = field(default_factory=list)
    bare_questions: int = 0


async def work_chunk(
    task: ChunkTask,
    settings: ChunkSettings,
    llm: LanguageModel,
    embedder: EmbeddingModel | None,
    progress: Progress | None = None,
    meter: CpuMeter | None = None,
) -> ChunkResult:
    """Exact stage, then (semantic stage on) embedding and block decisions, of one chunk.

    ``progress`` hears of finished exact groups (``exact``), embedded texts (``embed``,
    whose total, counted as the chunk's records, is corrected to its distinct texts) and
    semantic blocks (``semantic``) as they finish; ``meter`` measures the CPU of each
    stage (a new one measures this process only).
    """
    progress = progress or NoProgress()
    started = time.perf_counter()
    meter = meter or CpuMeter()
    before, before_wall = dict(meter.stages), dict(meter.wall)
    result = ChunkResult(task.number)
    originals, final = await _exact_stage(task, settings, llm, progress, meter, result)
    if settings.semantic and embedder is not None:
        final = await _semantic_stage(
            task, originals, final, settings, llm, embedder, progress, meter, result
        )
    with meter.stage("write"):
        result.outputs = [
            (unit.members, unit.relation.relation_id, unit.relation.to_json()) for unit in final
        ]
    result.cpu = {
        stage: round(seconds - before.get(stage, 0.0), 4)
        for stage, seconds in meter.stages.items()
        if seconds - before.get(stage, 0.0) > 0
    }
    result.wall = {
        stage: round(seconds - before_wall.get(stage, 0.0), 4)
        for stage, seconds in meter.wall.items()
        if stage in result.cpu
    }
    result.wall_s = time.perf_counter() - started
    return result


async def _exact_stage(
    task: ChunkTask,
    settings: ChunkSettings,
    llm: LanguageModel,
    progress: Progress,
    meter: CpuMeter,
    result: ChunkResult,
) -> tuple[dict[int, ExtractedRelation], list[Unit]]:
    """The chunk's relations read and its exact stage run: the relations by input index
    and the stage's units (its counts, issues and decisions in ``result``)."""
    config = settings.config
    with meter.stage("exact"), working_on(progress, "exact"):
        originals = task.originals()
        units = [Unit(originals[i], (i,)) for i in task.indices]
        exact = await ExactStage(
            config,
            llm,
            originals,
            lambda n: progress.advance("exact", n),
            defer_llm=config.semantic_merge,
            pinned=task.pinned,
        ).run(units)
        del units
        result.tally.add_exact(exact)
        result.exact_issues = exact.issues
        result.exact_decisions = [d.model_dump(mode="json") for d in exact.decisions]
    return originals, exact.units


class _TextsTotal:
    """The embed phase's total: the chunk was counted as one text per index until the
    stage says how many distinct texts it embeds (it may say more later: the texts a
    first stage could not settle)."""

    def __init__(self, progress: Progress, estimated: int) -> None:
        self.progress = progress
        self.estimated = estimated

    def __call__(self, count: int) -> None:
        self.progress.add_total("embed", count - self.estimated)
        self.estimated = 0


async def _semantic_stage(
    task: ChunkTask,
    originals: dict[int, ExtractedRelation],
    units: list[Unit],
    settings: ChunkSettings,
    llm: LanguageModel,
    embedder: EmbeddingModel,
    progress: Progress,
    meter: CpuMeter,
    result: ChunkResult,
) -> list[Unit]:
    """The chunk's semantic stage over the exact stage's ``units``: embedding, then the
    blocks' decisions; the final units (counts, issues, decisions, clarifications and the
    cross-block report's part in ``result``)."""
    report = ReportPart() if settings.report else None
    stage = SemanticStage(
        settings.config,
        llm,
        embedder,
        originals,
        settings.entities,
        on_block_done=lambda n: progress.advance("semantic", n),
        on_texts=_TextsTotal(progress, len(task.indices)),
        on_embedded=lambda n: progress.advance("embed", n),
        memory=settings.memory,
        report=report,
        shared_names=settings.shared_names,
        pinned=task.pinned,
        canaries=task.canaries,
    )
    needs = task.report_needs
    with meter.stage("embed"), working_on(progress, "embed"):
        prepared = await stage.prepare(
            units, None if needs is None else (lambda unit: unit.first in needs)
        )
    result.texts_embedded = len(prepared.descriptions.matrix) + len(prepared.names.matrix)
    result.embedded_by = prepared.counts.as_dict()
    with meter.stage("decide"), working_on(progress, "semantic"):
        semantic = await stage.decide(prepared)
        del prepared
        result.tally.add_semantic(semantic)
        result.semantic_issues = semantic.issues
        result.semantic_decisions = [d.model_dump(mode="json") for d in semantic.decisions]
        result.clarifications = semantic.clarifications
        result.llm_questions = semantic.llm_questions
        result.canary_answers = semantic.canary_answers
        result.bare_questions = semantic.bare_questions
        result.canaries = pick(semantic.canaries, PER_CHUNK, ("chunk", task.indices[:1]))
    result.report = report
    return semantic.units
