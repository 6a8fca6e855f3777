"""The driver of a run: it knows the order of the run's phases, and only that.

intake (stream in, validate, remap, park)            run.intake
─► the model stack                                    providers.stack
─► report candidates                                  stages.semantic.partners
─► chunks of whole blocks, worked by the engine       engines (stages.chunk.work_chunk:
   (results taken in plan order)                        exact stage ─► semantic stage)
─► write each chunk's relations, log its decisions    run.writer
─► relations that bypass the stages (self-loops)
─► cross-block entity report                          stages.semantic.neighbours
─► logs and rejected records                          run.writer
─► the result                                         run.result
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import aclosing, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from relmerge.cache import RunCache
from relmerge.config import DeduplicateRelationsConfig
from relmerge.cputime import CpuMeter
from relmerge.decide.retry import UNAVAILABLE
from relmerge.engines.base import ChunkEngine, ChunkRun, EngineEmbedder
from relmerge.engines.figures import EngineFigures
from relmerge.engines.local import default_engine
from relmerge.errors import ConfigError
from relmerge.io.records import RawRecord
from relmerge.model import EntityContext, StepIssue
from relmerge.progress import Progress, as_progress, working_on
from relmerge.providers.base import LanguageModel
from relmerge.providers.cached import persistent_layer
from relmerge.providers.embedding import EmbeddingModel, has_first_stage
from relmerge.providers.gate import CanaryGateModel
from relmerge.providers.stack import ModelStack, build_model_stack, without_recent_texts
from relmerge.review.memory import AnswerMemory
from relmerge.run.canaries import CanaryDesk, Rework
from relmerge.run.cost import cost_of
from relmerge.run.intake import (
    Intake,
    canonical_entities,
    check_intake,
    plan_chunks,
    read_input,
)
from relmerge.run.phases import Clock, Phases
from relmerge.run.result import Breaker, Budget, RunOutput, RunResult, Tokens, canary_figures
from relmerge.run.writer import OutputWriter, RunLogs, Written
from relmerge.stages.chunk import ChunkResult, ChunkSettings, ChunkTask, Tally, work_chunk
from relmerge.stages.remap import validate_entity_mapping
from relmerge.stages.semantic.neighbours import EntityReport
from relmerge.stages.semantic.partners import report_candidates
from relmerge.stores.base import ObjectStore

NO_EMBEDDER = (
    "semantic merge needs an embedding model (component 'models.embedding'; CLI: --embedding); "
    "or turn it off with semantic_merge=False (CLI: --no-semantic)"
)


async def run_pipeline(
    raws: Iterable[RawRecord],
    entity_id_mapping: Any,
    config: DeduplicateRelationsConfig,
    llm: LanguageModel,
    store: ObjectStore,
    progress: Progress | None = None,
    embedder: EmbeddingModel | None = None,
    entities: Sequence[EntityContext] = (),
    memory: AnswerMemory | None = None,
    before_work: Callable[[], Awaitable[None]] | None = None,
    cache: RunCache | None = None,
    engine: ChunkEngine | None = None,
    log_prefix: str = "",
    preflight_requests: int = 0,
    pinned: frozenset[str] = frozenset(),
) -> RunOutput:
    """Deduplicate ``raws`` and write the relation files and logs into ``store``.

    ``raws`` is read once, as it streams (a generator is fine). ``llm`` is the provider
    (the run builds its stack: ``providers.stack.build_model_stack``); ``embedder`` is
    required when ``config.semantic_merge``; ``entities`` (ids, names, profiles) are the
    judge's context. ``before_work`` runs once the input is known to be usable and before
    anything is spent or written (the CLI claims OUT there, so bad input never touches an
    earlier run's outputs). With a ``cache``, an LLM request asked before (in this run or
    an earlier one) is answered from it, not sent again. ``engine`` works the chunks
    (default: ``engines.local.default_engine``: worker processes on this machine's CPUs
    for a batch of several chunks, else this process; ``engines.ray_engine.RayEngine``:
    on Ray workers); the run closes it when it ends. A batch larger than
    ``config.records_per_chunk`` is decided a chunk of whole blocks at a time.
    The logs (``decisions_key``, ``clarifications_key``, ``rejected_key``) are written under
    ``log_prefix`` (the step: a prefix naming the run), at the store's root without one.
    ``preflight_requests``: the requests the caller's preflight sent (reported, not
    spent from the budget). An endpoint that stops answering mid-run opens the circuit
    breaker (``config.llm_breaker_groups``): the groups left get the issue
    ``llm_unavailable``, and the run still completes. ``pinned``: ids of relations decided
    before (a growing graph's settled ones): two of them are never merged nor judged
    against each other, as a store merge pins its stored relations.
    """
    if config.semantic_merge and embedder is None:
        raise ConfigError(NO_EMBEDDER)
    mapping = validate_entity_mapping(entity_id_mapping)
    progress = as_progress(progress)
    clock = Clock()
    meter = CpuMeter(helpers=embedder)
    with meter.stage("load"):
        intake = read_input(raws, mapping, config, progress)
    run: _Run | None = None
    try:
        check_intake(intake, config)
        if before_work is not None:
            await before_work()
        clock.lap("load")
        run = _Run(intake, config, store, clock, meter, log_prefix.strip("/"), preflight_requests)
        run.pinned = frozenset(i for i, rid in enumerate(intake.ids) if rid in pinned)
        run.start(progress, llm, cache)
        return await _deduplicate(
            run, embedder, canonical_entities(entities, mapping), memory, engine
        )
    finally:
        intake.spool.close()
        if run is not None:
            run.logs.close()


@dataclass
class _Run:
    """What one run's phases share, from the input taken in to the result."""

    intake: Intake
    config: DeduplicateRelationsConfig
    store: ObjectStore
    clock: Clock
    meter: CpuMeter
    log_prefix: str
    preflight_requests: int
    logs: RunLogs = field(default_factory=RunLogs)
    tally: Tally = field(default_factory=Tally)
    exact_issues: list[StepIssue] = field(default_factory=list)
    semantic_issues: list[StepIssue] = field(default_factory=list)
    phases: Phases = field(init=False)
    models: ModelStack = field(init=False)
    canaries: CanaryDesk | None = None
    pinned: frozenset[int] = frozenset()  # input indices of relations decided before
    writer: OutputWriter = field(init=False)

    def start(self, progress: Progress, llm: LanguageModel, cache: RunCache | None) -> None:
        """The run's phases (their totals known from intake), its model stack (whose
        requests are the ``llm`` phase) and its writer."""
        intake = self.intake
        totals = {
            "exact": intake.exact_group_count(),
            "embed": len(intake.mapped),
            "semantic": intake.multi_block_count(),
        }
        self.phases = Phases(progress, totals)
        self.models = build_model_stack(llm, self.config, cache=cache, progress=self.phases)
        prefix = self.config.deduplicated_relations_prefix
        self.writer = OutputWriter(self.store, prefix, intake.ids, self.phases)


async def _deduplicate(
    run: _Run,
    embedder: EmbeddingModel | None,
    entities: dict[str, EntityContext],
    memory: AnswerMemory | None,
    engine: ChunkEngine | None,
) -> RunOutput:
    """The chunks, worked by the engine and written as they land; then what bypassed the
    stages, the cross-block report, the logs and the result."""
    config, intake = run.config, run.intake
    semantic_on = config.semantic_merge and embedder is not None
    persistent = persistent_layer(embedder)
    if persistent is not None:
        persistent.begin_run()  # each chunk embeds its own texts, on every engine
    report = (
        EntityReport(config.similarity_threshold, config.entity_report_limit)
        if semantic_on
        else None
    )
    chunks = plan_chunks(intake, config.records_per_chunk)
    engine = engine or default_engine(len(chunks), embedder if semantic_on else None)
    work = EngineFigures(engine.name, engine.in_process)
    settings = ChunkSettings(
        config,
        entities,
        memory,
        intake.shared_names(config.generic_name_share),
        semantic=semantic_on,
        report=report is not None and config.entity_report_limit > 0,
    )
    if embedder is not None:
        embedder = without_recent_texts(embedder)  # each chunk's texts batched alike
    chunk_run = ChunkRun(
        settings, run.models.model, embedder, run.phases, run.meter, share=run.writer.share
    )
    try:
        needs = None
        if settings.report:
            with run.clock.timed("embed"), run.meter.stage("plan"):
                split = config.two_stage_embedding and has_first_stage(embedder)
                needs = await _report_needs(
                    intake, config, EngineEmbedder(engine, chunk_run, ""), every=split
                )
        rework = _rework(intake, chunks, needs, chunk_run, engine, run.pinned)
        desk = run.canaries = CanaryDesk(config, run.models.model, run.models.gate, rework)
        tasks = _tasks(intake, chunks, needs, lambda: desk.wanted, run.pinned)
        results = engine.run_chunks(chunk_run, tasks)
        await _work_chunks(run, results, work, report, desk)
        named = EngineEmbedder(engine, chunk_run, embedder.name if embedder is not None else "")
        issues = await _after_chunks(run, report, named)
    except BaseException:
        run.writer.abandon()
        raise
    finally:
        if report is not None:
            report.close()
        await engine.close()
    written = run.writer.finish()
    with run.clock.timed("write"), run.meter.stage("write"), working_on(run.phases, "write"):
        log_keys = await run.logs.store(run.store, config, run.log_prefix, intake.rejected)
    run.phases.end("write")
    result = _result(run, written, issues, embedder.name if semantic_on and embedder else None)
    result = _with_engine(result, run, work, engine, len(chunks))
    return RunOutput(
        relations=written.relations,
        relation_keys=written.keys,
        relation_id_mapping=written.mapping,
        summary=result,
        rejected=intake.rejected,
        issues=issues,
        log_keys=log_keys,
    )


def _tasks(
    intake: Intake,
    chunks: list[npt.NDArray[np.int64]],
    needs: npt.NDArray[np.bool_] | None,
    canaries: Callable[[], bool] = lambda: False,
    pinned: frozenset[int] = frozenset(),
) -> Iterator[ChunkTask]:
    """The chunks as the engine takes them: read from the spool one at a time, each told
    whether the verdict still wants canaries (``canaries``) when it is read, and which of
    its relations are pinned."""
    for number, chunk in enumerate(chunks):
        indices = chunk.tolist()
        wanted = None if needs is None else frozenset(chunk[needs[chunk]].tolist())
        raw = intake.spool.load_raw(indices)
        held = frozenset(i for i in indices if i in pinned) if pinned else frozenset()
        yield ChunkTask(number, indices, raw, wanted, held, canaries=canaries())


async def _report_needs(
    intake: Intake, config: DeduplicateRelationsConfig, embedder: EmbeddingModel, every: bool
) -> npt.NDArray[np.bool_]:
    """By input index: whether the relation's unit needs a vector for the report (see
    ``partners``). ``every``: judge every relation by its partners, not only those alone
    in their block (a two-stage embedding gives the others a first-stage vector only)."""
    ends, names = intake.endpoints()
    alone = intake.singletons()
    marked = await report_candidates(
        ends,
        names,
        list(intake.name_numbers),
        np.ones_like(alone) if every else alone,
        config.entity_report_limit,
        embedder.embed,
    )
    needs = np.zeros(len(intake.ids), dtype=np.bool_)
    needs[np.array(intake.mapped, dtype=np.int64)] = marked
    return needs


async def _work_chunks(
    run: _Run,
    results: AsyncGenerator[ChunkResult, None],
    work: EngineFigures,
    report: EntityReport | None,
    desk: CanaryDesk,
) -> None:
    """Each chunk's result as the engine hands it back (in plan order): its earned
    canaries asked, then (once the model is judged, see ``run.canaries``) counted, its relations
    written, its decisions and clarifications logged."""
    clock, meter = run.clock, run.meter
    async with aclosing(results):
        while True:
            with clock.timed("waiting for workers") if not work.local else nullcontext():
                done = await anext(results, None)
            if done is None:
                break
            with meter.stage("collect"):
                work.add(done)
            await desk.ask(done)
            for ready in await desk.release(done):
                await _write_chunk(run, ready, report)
    for ready in desk.drain():
        await _write_chunk(run, ready, report)


async def _write_chunk(run: _Run, done: ChunkResult, report: EntityReport | None) -> None:
    """One chunk's result counted, its relations written, its decisions logged."""
    clock, meter = run.clock, run.meter
    with meter.stage("collect"):
        run.tally.add(done.tally)
        run.exact_issues.extend(done.exact_issues)
        run.semantic_issues.extend(done.semantic_issues)
        run.logs.clarifications.extend(done.clarifications)
        if report is not None and done.report is not None:
            report.add_part(done.report)
    with clock.timed("write"), meter.stage("write"):
        final_of = await run.writer.write(done.outputs)
    with meter.stage("collect"):
        run.logs.add_decisions(done.exact_decisions, done.semantic_decisions, final_of)


def _rework(
    intake: Intake,
    chunks: list[npt.NDArray[np.int64]],
    needs: npt.NDArray[np.bool_] | None,
    chunk_run: ChunkRun,
    engine: ChunkEngine,
    pinned: frozenset[int] = frozenset(),
) -> Rework:
    """How the driver works a chunk again without the model (the canaries distrust it):
    the same task, the run's embedder as its engine runs it, the model behind a closed
    gate (its blocks fail as ``llm_unavailable``, their pairs go to review)."""
    embedder: EmbeddingModel | None = chunk_run.embedder
    if embedder is not None and not engine.in_process:
        embedder = EngineEmbedder(engine, chunk_run, embedder.name)

    async def again(number: int, reason: str) -> ChunkResult:
        (task,) = _tasks(intake, [chunks[number]], needs, pinned=pinned)
        task.number = number
        gated = CanaryGateModel(chunk_run.model, reason)
        return await work_chunk(task, chunk_run.settings, gated, embedder, None, chunk_run.meter)

    return again


async def _after_chunks(
    run: _Run, report: EntityReport | None, embedder: EngineEmbedder
) -> list[StepIssue]:
    """The relations that bypassed the stages (self-loops after mapping) written, every
    file on disk, then the cross-block entity report; the run's issues, in order."""
    run.phases.end("exact", "embed")
    intake = run.intake
    with run.clock.timed("write"), run.meter.stage("write"):
        await run.writer.write(
            ((index,), relation.relation_id, relation.to_json())
            for index, relation in intake.passthrough
        )
        await run.writer.written()
    issues = [*intake.issues, *run.exact_issues, *run.semantic_issues]
    if report is not None:  # the semantic stage ran, with an embedder
        with run.clock.timed("semantic"), run.meter.stage("report"):
            issues.extend(await report.issues(embedder))
    run.phases.end("semantic", "llm")
    return issues


def _result(
    run: _Run, written: Written, issues: list[StepIssue], embedding_model: str | None
) -> RunResult:
    """The run's figures (``engine`` and ``seconds`` filled in by :func:`_with_engine`)."""
    tally, stats, config = run.tally, run.models.stats, run.config
    budget, breaker = run.models.budget, run.models.breaker
    return RunResult(
        input_record_count=run.intake.record_count,
        rejected_count=len(run.intake.rejected),
        input_relation_count=len(run.intake.ids),
        output_relation_count=len(written.relations),
        remapped_relation_count=run.intake.remapped_count,
        exact_merge_count=tally.exact_merges,
        semantic_merge_count=tally.semantic_merges,
        human_merge_count=tally.human_merges,
        human_exact_merge_count=tally.human_exact_merges,
        failed_group_count=tally.failed,
        llm_needed_group_count=tally.llm_needed_groups,
        llm_needed_pair_count=tally.llm_needed_pairs,
        llm_needed_block_count=tally.llm_needed_blocks,
        llm_needed_pair_tiers=dict(sorted(tally.llm_needed_tiers.items())),
        llm_needed_description_only_pair_count=tally.llm_needed_without_names,
        clarification_count=run.logs.clarifications.count,
        exact_round_count=tally.exact_rounds,
        semantic_round_count=tally.semantic_rounds,
        blocking=tally.blocking,
        decisions_by_tier=dict(sorted(tally.tiers.items())),
        embedding_model=embedding_model,
        llm_model=run.models.model.name,
        preflight_requests=run.preflight_requests,
        llm_requests=stats.requests,
        llm_failed_requests=stats.failed_requests,
        llm_invalid_answers=stats.invalid_answers,
        llm_cache_hits=stats.cache_hits,
        tokens=Tokens(**stats.tokens()),
        llm_budget=Budget(
            config.max_llm_requests,
            config.max_tokens,
            budget is not None and budget.exhausted,
        ),
        llm_unavailable_group_count=sum(1 for issue in issues if issue.code == UNAVAILABLE),
        llm_circuit_breaker=Breaker(
            config.llm_breaker_groups,
            breaker is not None and breaker.open,
            breaker.refused if breaker is not None else 0,
        ),
        chunk_count=0,
        seconds={},
        engine={},
        issues=tuple(issues),
        config=config,
        canaries=canary_figures(run.canaries, config),
        cost=cost_of(stats),
    )


def _with_engine(
    result: RunResult, run: _Run, work: EngineFigures, engine: ChunkEngine, chunks: int
) -> RunResult:
    """The result with where the run's time went: seconds per stage, the engine's figures."""
    seconds = run.clock.total(work.wall)
    figures = work.figures(engine.describe(), run.meter, run.clock.elapsed())
    return replace(result, chunk_count=chunks, seconds=seconds, engine=figures)
