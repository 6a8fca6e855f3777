"""The driver of a run: it knows the order of the run's phases.

intake (stream in, validate, remap, park) ─► report candidates ─► chunks of whole blocks,
worked by the engine (``relmerge.chunk``: exact stage ─► semantic stage), results taken
in plan order ─► write relations, log decisions and clarifications
─► cross-block entity report ─► id mapping, logs, rejected records
"""

from __future__ import annotations

import asyncio
import time
from array import array
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import aclosing, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np
import numpy.typing as npt
import orjson

from relmerge.cache import RunCache
from relmerge.chunk import (
    ChunkEngine,
    ChunkRun,
    ChunkSettings,
    ChunkTask,
    EngineEmbedder,
    Tally,
)
from relmerge.config import DeduplicateRelationsConfig
from relmerge.cputime import CpuMeter
from relmerge.decide.retry import UNAVAILABLE
from relmerge.engines.figures import EngineFigures
from relmerge.engines.local import default_engine
from relmerge.errors import ConfigError, InputError
from relmerge.ids import merged_relation_id
from relmerge.intake import Intake, plan_chunks, take_in
from relmerge.io.records import RawRecord, Rejected
from relmerge.io.spool import JsonLines, ParkedBytes
from relmerge.io.write import jsonl, relation_key, write_files
from relmerge.model import STEP_NAME, EntityContext, ExtractedRelation, StepIssue
from relmerge.progress import (
    CountsBytes,
    NoProgress,
    PhaseTimes,
    Progress,
    as_progress,
    input_size,
    working_on,
)
from relmerge.providers.accounting import AccountingModel
from relmerge.providers.base import LanguageModel
from relmerge.providers.breaker import CircuitBreakerModel
from relmerge.providers.cached import CachingModel, persistent_layer
from relmerge.providers.embedding import CachedEmbedder, EmbeddingModel
from relmerge.providers.limits import BudgetModel
from relmerge.providers.progress import ProgressModel
from relmerge.review.memory import AnswerMemory
from relmerge.stages.remap import validate_entity_mapping
from relmerge.stages.semantic.neighbours import EntityReport
from relmerge.stages.semantic.partners import report_candidates
from relmerge.stores.base import ObjectStore

NO_EMBEDDER = (
    "semantic merge needs an embedding model (component 'models.embedding'; CLI: --embedding); "
    "or turn it off with semantic_merge=False (CLI: --no-semantic)"
)


class OutputRelations(Sequence[ExtractedRelation]):
    """The output relations, in order, kept as their JSON bytes (as written to the store,
    parked in a temporary file: see ``io.spool.ParkedBytes``). Items are parsed when read."""

    def __init__(self, encoded: Sequence[bytes]) -> None:
        self._encoded = encoded

    def __len__(self) -> int:
        return len(self._encoded)

    @overload
    def __getitem__(self, index: int) -> ExtractedRelation: ...

    @overload
    def __getitem__(self, index: slice) -> list[ExtractedRelation]: ...

    def __getitem__(self, index: int | slice) -> ExtractedRelation | list[ExtractedRelation]:
        if isinstance(index, slice):
            return [_parse(data) for data in self._encoded[index]]
        return _parse(self._encoded[index])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, OutputRelations):
            return list(self._encoded) == list(other._encoded)
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]


def _parse(data: bytes) -> ExtractedRelation:
    return ExtractedRelation.model_construct(**orjson.loads(data))


@dataclass(repr=False)
class RunOutput:
    """Everything a run produced; the step turns it into artifacts, the CLI into files."""

    relations: Sequence[ExtractedRelation]
    relation_keys: list[str]
    relation_id_mapping: dict[str, str]
    result: dict[str, Any]
    rejected: list[Rejected] = field(default_factory=list)
    issues: list[StepIssue] = field(default_factory=list)
    log_keys: list[str] = field(default_factory=list)  # the logs' store keys, as written

    def __repr__(self) -> str:  # the full repr of a large run costs seconds
        return f"RunOutput({len(self.relations)} relations, {len(self.rejected)} rejected)"


class _Clock:
    """Seconds per stage. Work overlaps (a chunk's files are written while the next one is
    worked; Ray workers work chunks side by side), so the stages' seconds can add up to
    more than the total."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._start = time.perf_counter()
        self._last = self._start

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self._add(stage, now - self._last)
        self._last = now

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self._add(stage, time.perf_counter() - started)

    def _add(self, stage: str, seconds: float) -> None:
        self.seconds[stage] = round(self.seconds.get(stage, 0.0) + seconds, 4)

    def elapsed(self) -> float:
        return time.perf_counter() - self._start

    def total(self, more: dict[str, float] | None = None) -> dict[str, float]:
        """Seconds per stage, with ``more`` (stage seconds measured elsewhere) added."""
        for stage, seconds in (more or {}).items():
            self._add(stage, seconds)
        return {**self.seconds, "total": round(self.elapsed(), 4)}


def canonical_entities(
    entities: Sequence[EntityContext], mapping: dict[str, str]
) -> dict[str, EntityContext]:
    """Entity contexts by canonical id (an entities file may still use alias ids)."""
    contexts: dict[str, EntityContext] = {}
    for entity in entities:
        canonical = mapping.get(entity.entity_id, entity.entity_id)
        if canonical not in contexts or entity.entity_id == canonical:
            contexts[canonical] = EntityContext(canonical, entity.name, entity.profile, entity.type)
    return contexts


def free_merged_ids(
    outputs: Iterable[tuple[tuple[int, ...], str, bytes]], ids: Sequence[str], taken: set[str]
) -> Iterator[tuple[tuple[int, ...], str, bytes]]:
    """Give a merged relation another id when an input relation already has its id.

    Merged ids are predictable (a hash of member ids and name), so an input can carry one;
    the input relation keeps its id (it must, for idempotence) and the merged one is
    re-hashed with a salt until free. ``outputs`` are (members, id, JSON) per output
    relation; ``ids`` the input ids by input index; ``taken`` holds every valid input id.
    Without such an input nothing changes.
    """
    for members, relation_id, data in outputs:
        if len(members) > 1 and relation_id in taken:
            relation = _parse(data)
            member_ids = [ids[i] for i in members]
            salt = 1
            while (new_id := merged_relation_id(member_ids, relation.name, salt)) in taken:
                salt += 1
            relation = relation.model_copy(update={"relation_id": new_id})
            relation_id, data = new_id, relation.to_json()
        yield members, relation_id, data


async def _report_needs(
    intake: Intake, config: DeduplicateRelationsConfig, embedder: EmbeddingModel
) -> npt.NDArray[np.bool_]:
    """By input index: whether the relation's unit needs a vector (see ``partners``)."""
    ends, names = intake.endpoints()
    marked = await report_candidates(
        ends,
        names,
        list(intake.name_numbers),
        intake.singletons(),
        config.entity_report_limit,
        embedder.embed,
    )
    needs = np.zeros(len(intake.ids), dtype=np.bool_)
    needs[np.array(intake.mapped, dtype=np.int64)] = marked
    return needs


def strict_failure(rejected: Sequence[Rejected]) -> str:
    """The one-line error of ``strict=True``: how many records, and the first one's reason."""
    first = rejected[0]
    more = f" (and {len(rejected) - 1} more)" if len(rejected) > 1 else ""
    return (
        f"strict mode: {len(rejected)} input record(s) rejected; "
        f"first: {first.origin}: {first.reason}{more}"
    )


@dataclass
class _PhaseTime:
    """When a phase worked: the intervals during which some part of it was working (any
    chunk in it, any LLM request in flight), told by ``working``; seconds measured
    elsewhere (a Ray worker's chunk) are added whole."""

    first: float
    last: float
    active: int = 0
    since: float = 0.0
    seconds: float = 0.0
    told: bool = False  # some part said when it worked: the seconds are those

    def worked(self, now: float) -> float:
        if not self.told:
            return self.last - self.first
        return self.seconds + (now - self.since if self.active else 0.0)


class _Phases(NoProgress):
    """The run's progress as the chunks report it: each phase is shown from its first
    news (whatever the chunk, wherever it is worked), starting from the total known for
    it. The exact, embedding and semantic phases end as soon as their work is complete
    (their totals are final once every chunk has corrected them, so done = total only
    at the very end), the others when the run ends them. Each phase's closing line gets
    the seconds it worked (:class:`_PhaseTime`), not those of the phases after it."""

    ENDS_AT_TOTAL = ("exact", "embed", "semantic")

    def __init__(
        self,
        progress: Progress,
        totals: Mapping[str, int],
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.progress = progress
        self.totals = dict(totals)
        self.done: dict[str, int] = {}
        self.started: list[str] = []
        self.ended: set[str] = set()
        self.times: dict[str, _PhaseTime] = {}
        self._clock = clock

    def _news(self, phase: str) -> bool:
        """Begin ``phase`` at its first news; False once it has ended (news ignored)."""
        if phase in self.ended:
            return False
        now = self._clock()
        if phase not in self.started:
            self.started.append(phase)
            self.times[phase] = _PhaseTime(now, now)
            self.progress.start(phase, self.totals.get(phase, 0))
        self.times[phase].last = now
        return True

    def advance(self, stage: str, amount: int = 1) -> None:
        if self._news(stage):
            self.done[stage] = self.done.get(stage, 0) + amount
            self.progress.advance(stage, amount)
            self._end_if_complete(stage)

    def add_total(self, stage: str, amount: int) -> None:
        if self._news(stage):
            self.totals[stage] = self.totals.get(stage, 0) + amount
            self.progress.add_total(stage, amount)

    def count(self, stage: str, name: str, amount: int = 1) -> None:
        if self._news(stage):
            self.progress.count(stage, name, amount)

    def working(self, stage: str, busy: bool) -> None:
        """A part of ``stage``'s work starts or stops (a chunk, an LLM request, a write)."""
        if not self._news(stage):
            return
        time_ = self.times[stage]
        now, time_.told = time_.last, True
        if busy:
            if time_.active == 0:
                time_.since = now
            time_.active += 1
        elif time_.active > 0:
            time_.active -= 1
            if time_.active == 0:
                time_.seconds += now - time_.since
            self._end_if_complete(stage)

    def worked(self, stage: str, seconds: float) -> None:
        """``seconds`` of ``stage``'s work measured elsewhere (a Ray worker's chunk)."""
        if self._news(stage):
            self.times[stage].told = True
            self.times[stage].seconds += seconds

    def _end_if_complete(self, stage: str) -> None:
        if (
            stage in self.ENDS_AT_TOTAL
            and self.done.get(stage, 0) >= self.totals.get(stage, 0)
            and self.times[stage].active == 0
        ):
            self.end(stage)

    def end(self, *phases: str) -> None:
        for phase in phases:
            if phase in self.started:
                self.started.remove(phase)
                self.ended.add(phase)
                if isinstance(self.progress, PhaseTimes):
                    self.progress.took(phase, self.times[phase].worked(self._clock()))
                self.progress.finish(phase)


def final_decision_lines(
    lines: Iterable[dict[str, Any]], final_of: Mapping[str, str]
) -> Iterator[dict[str, Any]]:
    """Decision lines whose ``output_ids`` are the final outputs of their members: an id
    a stage gave an intermediate merge (merged again later) is never logged."""
    for line in lines:
        finals = (final_of.get(member) for member in line["member_ids"])
        yield {**line, "output_ids": list(dict.fromkeys(f for f in finals if f is not None))}


@dataclass
class _Logs:
    """The run's logs, written chunk by chunk to temporary files (see ``io.spool``)."""

    exact: JsonLines = field(default_factory=JsonLines)
    semantic: JsonLines = field(default_factory=JsonLines)
    clarifications: JsonLines = field(default_factory=JsonLines)

    def close(self) -> None:
        for log in (self.exact, self.semantic, self.clarifications):
            log.close()


def _check_intake(intake: Intake, config: DeduplicateRelationsConfig) -> None:
    if intake.record_count == 0:
        raise InputError("the input holds no relation records")
    if config.strict and intake.rejected:
        raise InputError(strict_failure(intake.rejected))
    if intake.rejected and not intake.ids:  # a wrong file, not a batch with a few bad records
        raise InputError(
            f"none of the {len(intake.rejected)} input records is a valid relation; "
            f"first: {intake.rejected[0].origin}: {intake.rejected[0].reason}"
        )


def _read(
    raws: Iterable[RawRecord],
    mapping: dict[str, str],
    config: DeduplicateRelationsConfig,
    progress: Progress,
) -> Intake:
    """Take the input in, counted in bytes where it says how much of it is read."""
    phase, total = input_size(raws)
    progress.start(phase, total)
    if phase == "read":
        done = 0

        def on_read(records: int) -> None:
            nonlocal done
            now = raws.bytes_read if isinstance(raws, CountsBytes) else done
            progress.advance("read", now - done)
            done = now

    else:

        def on_read(records: int) -> None:
            progress.advance("load", records)

    intake = take_in(raws, mapping, config.records_per_chunk, on_read)
    progress.finish(phase)
    return intake


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
) -> RunOutput:
    """Deduplicate ``raws`` and write the relation files and logs into ``store``.

    ``raws`` is read once, as it streams (a generator is fine). ``embedder`` is required
    when ``config.semantic_merge``; ``entities`` (ids, names, profiles) are the judge's
    context. ``before_work`` runs once the input is known to be usable and before anything
    is spent or written (the CLI claims OUT there, so bad input never touches an earlier
    run's outputs). With a ``cache``, an LLM request asked before (in this run or an
    earlier one) is answered from it, not sent again. ``engine`` works the chunks
    (default: ``engines.local.default_engine``: worker processes on this machine's CPUs
    for a batch of several chunks, else this process; ``engines.ray_engine.RayEngine``:
    on Ray workers); the run closes it when it ends. A batch larger than
    ``config.records_per_chunk`` is decided a chunk of whole blocks at a time.
    The logs (``decisions_key``, ``clarifications_key``, ``rejected_key``) are written under
    ``log_prefix`` (the step: a prefix naming the run), at the store's root without one.
    ``preflight_requests``: the requests the caller's preflight sent (reported, not
    spent from the budget). An endpoint that stops answering mid-run opens the circuit
    breaker (``config.llm_breaker_groups``): the groups left get the issue
    ``llm_unavailable``, and the run still completes.
    """
    if config.semantic_merge and embedder is None:
        raise ConfigError(NO_EMBEDDER)
    mapping = validate_entity_mapping(entity_id_mapping)
    progress = as_progress(progress)
    clock = _Clock()
    meter = CpuMeter(helpers=embedder)
    with meter.stage("load"):
        intake = _read(raws, mapping, config, progress)
    logs: _Logs | None = None
    try:
        _check_intake(intake, config)
        if before_work is not None:
            await before_work()
        clock.lap("load")
        logs = _Logs()
        return await _deduplicate(
            intake,
            mapping,
            config,
            llm,
            store,
            progress,
            embedder,
            entities,
            memory,
            cache,
            engine,
            logs,
            clock,
            meter,
            log_prefix.strip("/"),
            preflight_requests,
        )
    finally:
        intake.spool.close()
        if logs is not None:
            logs.close()


async def _deduplicate(
    intake: Intake,
    mapping: dict[str, str],
    config: DeduplicateRelationsConfig,
    llm: LanguageModel,
    store: ObjectStore,
    progress: Progress,
    embedder: EmbeddingModel | None,
    entities: Sequence[EntityContext],
    memory: AnswerMemory | None,
    cache: RunCache | None,
    engine: ChunkEngine | None,
    logs: _Logs,
    clock: _Clock,
    meter: CpuMeter,
    log_prefix: str,
    preflight_requests: int,
) -> RunOutput:
    phases = _Phases(
        progress,
        {
            "exact": intake.exact_group_count(),
            "embed": len(intake.mapped),
            "semantic": intake.multi_block_count(),
        },
    )
    sender: LanguageModel = ProgressModel(llm, phases) if llm.available else llm
    breaker = CircuitBreakerModel(sender, config.llm_breaker_groups)
    budget = BudgetModel(breaker, config.max_llm_requests, config.max_tokens)
    model = AccountingModel(
        CachingModel(budget, cache) if cache is not None else budget,
        on_invalid=lambda: phases.count("llm", "retried"),
    )
    semantic_on = config.semantic_merge and embedder is not None
    persistent = persistent_layer(embedder)
    if persistent is not None:
        persistent.begin_run()  # each chunk embeds its own texts, on every engine
    contexts = canonical_entities(entities, mapping)
    report = (
        EntityReport(config.similarity_threshold, config.entity_report_limit)
        if semantic_on
        else None
    )
    taken = set(intake.ids)
    tally = Tally()
    exact_issues: list[StepIssue] = []
    semantic_issues: list[StepIssue] = []
    prefix = config.deduplicated_relations_prefix
    firsts: array[int] = array("q")  # first member per output relation, as written
    keys_written: list[str] = []
    encoded = ParkedBytes()  # the output relations' JSON, parked on disk
    output_of: list[str] = [""] * len(intake.ids)  # input index -> output relation id

    writing: asyncio.Future[None] | None = None  # the files of the chunk before, on disk

    async def written() -> None:
        """Wait for the files handed to the store so far (a write error is raised here)."""
        nonlocal writing
        if writing is not None:
            pending, writing = writing, None
            await pending

    async def write(produced: Iterable[tuple[tuple[int, ...], str, bytes]]) -> dict[str, str]:
        """Write relations (members, id, JSON); the final output id of each member's id.

        The files go to the store while the next chunk is worked (writing is mostly the
        disk's time, working a chunk the CPU's); one chunk's files at a time, in order."""
        nonlocal writing
        files = []
        final_of: dict[str, str] = {}
        for members, relation_id, data in free_merged_ids(produced, intake.ids, taken):
            files.append((relation_key(prefix, relation_id), data))
            firsts.append(members[0])
            keys_written.append(files[-1][0])
            encoded.append(data)
            for index in members:
                output_of[index] = relation_id
                final_of[intake.ids[index]] = relation_id
        phases.add_total("write", len(files))
        await written()
        phases.working("write", True)
        writing = asyncio.ensure_future(
            write_files(store, files, lambda n: phases.advance("write", n))
        )
        writing.add_done_callback(lambda _: phases.working("write", False))
        return final_of

    chunks = plan_chunks(intake, config.records_per_chunk)
    engine = engine or default_engine(len(chunks), embedder if semantic_on else None)
    work = EngineFigures(engine.name, engine.in_process)
    settings = ChunkSettings(
        config,
        contexts,
        memory,
        intake.shared_names(config.generic_name_share),
        semantic=semantic_on,
        report=report is not None and config.entity_report_limit > 0,
    )
    # The chunks' texts are embedded without the cache of recent texts in front of the
    # embedder: each chunk's distinct texts go to the model as one list, whatever earlier
    # chunks held, so the model batches them the same way on every engine (its vectors
    # can differ in the last bits with the batch a text shares).
    if isinstance(embedder, CachedEmbedder):
        embedder = embedder.inner
    run = ChunkRun(settings, model, embedder, phases, meter)
    needs = None
    if settings.report:
        with clock.timed("embed"), meter.stage("plan"):
            needs = await _report_needs(intake, config, EngineEmbedder(engine, run, ""))

    def tasks() -> Iterator[ChunkTask]:
        for number, chunk in enumerate(chunks):
            indices = chunk.tolist()
            wanted = None if needs is None else frozenset(chunk[needs[chunk]].tolist())
            yield ChunkTask(number, indices, intake.spool.load_raw(indices), wanted)

    try:
        async with aclosing(engine.run_chunks(run, tasks())) as results:
            while True:
                with clock.timed("waiting for workers") if not work.local else nullcontext():
                    done = await anext(results, None)
                if done is None:
                    break
                with meter.stage("collect"):
                    work.add(done)
                    tally.add(done.tally)
                    exact_issues.extend(done.exact_issues)
                    semantic_issues.extend(done.semantic_issues)
                    logs.clarifications.extend(done.clarifications)
                    if report is not None and done.report is not None:
                        report.add_part(done.report)
                with clock.timed("write"), meter.stage("write"):
                    final_of = await write(done.outputs)
                with meter.stage("collect"):
                    logs.exact.extend(final_decision_lines(done.exact_decisions, final_of))
                    logs.semantic.extend(final_decision_lines(done.semantic_decisions, final_of))
        phases.end("exact", "embed")
        with clock.timed("write"), meter.stage("write"):
            await write(
                ((index,), relation.relation_id, relation.to_json())
                for index, relation in intake.passthrough
            )
            await written()
        issues = [*intake.issues, *exact_issues, *semantic_issues]
        if report is not None and embedder is not None:
            with clock.timed("semantic"), meter.stage("report"):
                issues.extend(await report.issues(EngineEmbedder(engine, run, embedder.name)))
        phases.end("semantic", "llm")
    except BaseException:
        if writing is not None:  # its thread ends on its own; nothing waits for it
            writing.cancel()
        encoded.close()
        raise
    finally:
        if report is not None:
            report.close()
        await engine.close()

    order = sorted(range(len(firsts)), key=firsts.__getitem__)  # input order
    keys = [keys_written[i] for i in order]
    relations = OutputRelations(encoded.ordered(array("q", order)))
    keys_written.clear()
    del firsts[:]
    if len(set(keys)) != len(keys):
        raise AssertionError("two output relations share an id")  # an internal bug, never input
    if not all(output_of):
        raise AssertionError("an input relation has no output")  # an internal bug, never input
    mapping_out = dict(zip(intake.ids, output_of, strict=True))
    log_keys: list[str] = []

    def log_key(name: str) -> str:
        log_keys.append(f"{log_prefix}/{name}" if log_prefix else name)
        return log_keys[-1]

    with clock.timed("write"), meter.stage("write"), working_on(phases, "write"):
        if config.decisions_key:
            await logs.exact.put(store, log_key(config.decisions_key), logs.semantic)
        if config.clarifications_key:
            await logs.clarifications.put(store, log_key(config.clarifications_key))
        if config.rejected_key:
            rejected = jsonl(r.to_dict() for r in intake.rejected)
            await store.put(log_key(config.rejected_key), rejected)
    phases.end("write")

    result: dict[str, Any] = {
        "step": STEP_NAME,
        "input_record_count": intake.record_count,
        "rejected_count": len(intake.rejected),
        "input_relation_count": len(intake.ids),
        "output_relation_count": len(relations),
        "remapped_relation_count": intake.remapped_count,
        # Every merge, by where it falls: within one exact key, or across keys.
        "exact_merge_count": tally.exact_merges,
        "semantic_merge_count": tally.semantic_merges,
        # Of those, the merges a person's answers made (relmerge review, remembered), and
        # how many of them exact_merge_count holds (the rest are in semantic_merge_count).
        "human_merge_count": tally.human_merges,
        "human_exact_merge_count": tally.human_exact_merges,
        "failed_group_count": tally.failed,
        "llm_needed_group_count": tally.llm_needed_groups,
        "llm_needed_pair_count": tally.llm_needed_pairs,
        # Where those pairs are and why the rules left them: blocks, tiers, and how many
        # were judged on their descriptions alone (names that prove nothing).
        "llm_needed_block_count": tally.llm_needed_blocks,
        "llm_needed_pair_tiers": dict(sorted(tally.llm_needed_tiers.items())),
        "llm_needed_description_only_pair_count": tally.llm_needed_without_names,
        "clarification_count": logs.clarifications.count,
        "exact_round_count": tally.exact_rounds,
        "semantic_round_count": tally.semantic_rounds,
        "blocking": tally.blocking,
        "decisions_by_tier": dict(sorted(tally.tiers.items())),
        "embedding_model": embedder.name if semantic_on and embedder is not None else None,
        "llm_model": llm.name,
        "preflight_requests": preflight_requests,
        "llm_requests": model.stats.requests,
        "llm_failed_requests": model.stats.failed_requests,
        "llm_invalid_answers": model.stats.invalid_answers,
        "llm_cache_hits": model.stats.cache_hits,
        "tokens": model.stats.tokens(),
        "llm_budget": {
            "max_requests": config.max_llm_requests,
            "max_tokens": config.max_tokens,
            "exhausted": budget.exhausted,
        },
        "llm_unavailable_group_count": sum(1 for issue in issues if issue.code == UNAVAILABLE),
        "llm_circuit_breaker": {
            "after_groups": config.llm_breaker_groups,
            "open": breaker.open,
            "refused_requests": breaker.refused,
        },
        "chunk_count": len(chunks),
        "seconds": clock.total(work.wall),
        "engine": work.figures(engine.describe(), meter, clock.elapsed()),
        "issues": [issue.model_dump(mode="json") for issue in issues],
        "config": config.model_dump(mode="json"),
    }
    return RunOutput(
        relations=relations,
        relation_keys=keys,
        relation_id_mapping=mapping_out,
        result=result,
        rejected=intake.rejected,
        issues=issues,
        log_keys=log_keys,
    )
