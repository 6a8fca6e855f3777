"""The only module that knows the stage order.

intake (stream in, validate, remap, park) ─► chunks of whole blocks, for each:
    exact stage ─► semantic stage ─► write relations, log decisions and clarifications
─► cross-block entity report ─► id mapping, logs, rejected records
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, overload

import orjson

from relmerge.cache import RunCache
from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.retry import UNAVAILABLE
from relmerge.engines.base import BlockEngine
from relmerge.errors import ConfigError, InputError
from relmerge.ids import merged_relation_id
from relmerge.intake import Intake, plan_chunks, take_in
from relmerge.io.records import RawRecord, Rejected
from relmerge.io.spool import JsonLines
from relmerge.io.write import jsonl, relation_key, write_files
from relmerge.model import STEP_NAME, Decision, ExtractedRelation, StepIssue
from relmerge.progress import Progress, ProgressModel, as_progress, input_size
from relmerge.prompts.context import EntityContext
from relmerge.providers.accounting import AccountingModel
from relmerge.providers.base import LanguageModel
from relmerge.providers.breaker import CircuitBreakerModel
from relmerge.providers.cached import CachingModel
from relmerge.providers.embedding import EmbeddingModel
from relmerge.providers.limits import BudgetModel
from relmerge.review.memory import AnswerMemory
from relmerge.stages.exact import ExactOutcome, ExactStage, exact_key
from relmerge.stages.remap import validate_entity_mapping
from relmerge.stages.semantic.blocking import add_pair_counts, block_pair_counts, make_blocks
from relmerge.stages.semantic.neighbours import EntityReport
from relmerge.stages.semantic.stage import PreparedUnits, SemanticOutcome, SemanticStage
from relmerge.stores.base import ObjectStore
from relmerge.units import Originals, Unit

NO_EMBEDDER = (
    "semantic merge needs an embedding model (component 'models.embedding'; CLI: --embedding); "
    "or turn it off with semantic_merge=False (CLI: --no-semantic)"
)


class OutputRelations(Sequence[ExtractedRelation]):
    """The output relations, in order, kept as their JSON bytes (as written to the store):
    a third of the memory of the objects at scale. Items are parsed when read."""

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
    """Seconds per stage. Chunks overlap (one is embedded while another is decided), so
    the stages' seconds can add up to more than the total."""

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

    def total(self) -> dict[str, float]:
        return {**self.seconds, "total": round(time.perf_counter() - self._start, 4)}


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


def plan(
    raws: Iterable[RawRecord], entity_id_mapping: Any, records_per_chunk: int = 50_000
) -> dict[str, Any]:
    """Count the work before spending anything: records, exact groups, blocks, pairs.

    No embedding, no LLM, nothing written (``relmerge run --dry-run``). Reads the input as
    a run does (one pass, chunks of whole blocks), so it counts what a run would decide.
    """
    intake = take_in(raws, validate_entity_mapping(entity_id_mapping), records_per_chunk)
    try:
        if intake.record_count == 0:
            raise InputError("the input holds no relation records")
        sizes: list[int] = []  # records per exact group
        blocking = block_pair_counts({})
        for chunk in plan_chunks(intake, records_per_chunk):
            relations = intake.spool.load(chunk.tolist())
            units = [Unit(relation, (index,)) for index, relation in relations.items()]
            sizes.extend(Counter(exact_key(unit.relation) for unit in units).values())
            add_pair_counts(blocking, block_pair_counts(make_blocks(units)))
    finally:
        intake.spool.close()
    return {
        "input_record_count": intake.record_count,
        "rejected_count": len(intake.rejected),
        "input_relation_count": len(intake.ids),
        "self_loops_after_mapping": len(intake.passthrough),
        "exact_groups_with_duplicates": sum(1 for n in sizes if n > 1),
        "records_in_exact_groups": sum(n for n in sizes if n > 1),
        **blocking,
    }


def free_merged_ids(units: list[Unit], originals: Originals, taken: set[str]) -> list[Unit]:
    """Give a merged relation another id when an input relation already has its id.

    Merged ids are predictable (a hash of member ids and name), so an input can carry one;
    the input relation keeps its id (it must, for idempotence) and the merged one is
    re-hashed with a salt until free. ``taken`` holds every valid input id. Without such
    an input nothing changes.
    """
    fixed = []
    for unit in units:
        relation = unit.relation
        if len(unit.members) > 1 and relation.relation_id in taken:
            ids = [originals[i].relation_id for i in unit.members]
            salt = 1
            while (new_id := merged_relation_id(ids, relation.name, salt)) in taken:
                salt += 1
            unit = Unit(relation.model_copy(update={"relation_id": new_id}), unit.members)
        fixed.append(unit)
    return fixed


def strict_failure(rejected: Sequence[Rejected]) -> str:
    """The one-line error of ``strict=True``: how many records, and the first one's reason."""
    first = rejected[0]
    more = f" (and {len(rejected) - 1} more)" if len(rejected) > 1 else ""
    return (
        f"strict mode: {len(rejected)} input record(s) rejected; "
        f"first: {first.origin}: {first.reason}{more}"
    )


class _Phases:
    """Each phase shown from when its work starts (once, whatever the chunk) to its end."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.started: list[str] = []

    def begin(self, phase: str, total: int | None) -> None:
        if phase not in self.started:
            self.started.append(phase)
            self.progress.start(phase, total)

    def end(self, *phases: str) -> None:
        for phase in phases:
            if phase in self.started:
                self.started.remove(phase)
                self.progress.finish(phase)


@dataclass
class _Tally:
    """The result counters, summed over chunks."""

    exact_merges: int = 0
    semantic_merges: int = 0
    failed: int = 0
    llm_needed_groups: int = 0
    llm_needed_pairs: int = 0
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
        self.failed += semantic.failed_block_count
        self.llm_needed_pairs += semantic.llm_needed_pair_count
        self.semantic_rounds = max(self.semantic_rounds, semantic.rounds)
        add_pair_counts(self.blocking, semantic.pair_counts)
        for tier, count in semantic.tier_counts.items():
            self.tiers[tier] = self.tiers.get(tier, 0) + count


@dataclass
class _Chunk:
    """A chunk between its preparation and its decisions."""

    originals: dict[int, ExtractedRelation]
    units: list[Unit]
    exact_decisions: list[Decision]
    stage: SemanticStage | None = None
    prepared: PreparedUnits | None = None


def final_decision_lines(
    decisions: Iterable[Decision], final_of: Mapping[str, str]
) -> Iterator[dict[str, Any]]:
    """Decision lines whose ``output_ids`` are the final outputs of their members: an id
    a stage gave an intermediate merge (merged again later) is never logged."""
    for decision in decisions:
        line = decision.model_dump(mode="json")
        finals = (final_of.get(member) for member in decision.member_ids)
        line["output_ids"] = list(dict.fromkeys(f for f in finals if f is not None))
        yield line


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
            now = int(getattr(raws, "bytes_read", done))
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
    engine: BlockEngine | None = None,
    log_prefix: str = "",
    preflight_requests: int = 0,
) -> RunOutput:
    """Deduplicate ``raws`` and write the relation files and logs into ``store``.

    ``raws`` is read once, as it streams (a generator is fine). ``embedder`` is required
    when ``config.semantic_merge``; ``entities`` (ids, names, profiles) are the judge's
    context. ``before_work`` runs once the input is known to be usable and before anything
    is spent or written (the CLI claims OUT there, so bad input never touches an earlier
    run's outputs). With a ``cache``, an LLM request asked before (in this run or an
    earlier one) is answered from it, not sent again. ``engine`` decides the semantic
    blocks (default: in this process; ``engines.ray_engine.RayEngine``: on Ray). A batch
    larger than ``config.records_per_chunk`` is decided a chunk of whole blocks at a time.
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
    engine: BlockEngine | None,
    logs: _Logs,
    clock: _Clock,
    log_prefix: str,
    preflight_requests: int,
) -> RunOutput:
    sender: LanguageModel = ProgressModel(llm, progress) if llm.available else llm
    breaker = CircuitBreakerModel(sender, config.llm_breaker_groups)
    budget = BudgetModel(breaker, config.max_llm_requests, config.max_tokens)
    model = AccountingModel(
        CachingModel(budget, cache) if cache is not None else budget,
        on_invalid=lambda: progress.count("llm", "retried"),
    )
    semantic_on = config.semantic_merge and embedder is not None
    contexts = canonical_entities(entities, mapping)
    report = (
        EntityReport(config.similarity_threshold, config.entity_report_limit)
        if semantic_on
        else None
    )
    taken = set(intake.ids)
    tally = _Tally()
    exact_issues: list[StepIssue] = []
    semantic_issues: list[StepIssue] = []
    prefix = config.deduplicated_relations_prefix
    outputs: list[tuple[int, str, bytes]] = []  # (first member, key, JSON) per output
    output_of: list[str] = [""] * len(intake.ids)  # input index -> output relation id

    async def write(units: list[Unit]) -> None:
        files = []
        for unit in units:
            relation_id = unit.relation.relation_id
            files.append((relation_key(prefix, relation_id), unit.relation.to_json()))
            outputs.append((unit.first, *files[-1]))
            for index in unit.members:
                output_of[index] = relation_id
        phases.begin("write", 0)
        progress.add_total("write", len(files))
        await write_files(store, files, lambda n: progress.advance("write", n))

    chunks = plan_chunks(intake, config.records_per_chunk)
    shared_names = intake.shared_names(config.generic_name_share)
    phases = _Phases(progress)
    try:

        async def prepare(indices: list[int], last: bool) -> _Chunk:
            """Load a chunk, run its exact stage and, with the semantic stage on, embed it."""
            phases.begin("exact", intake.exact_group_count())
            if llm.available and not config.semantic_merge:
                phases.begin("llm", 0)
            with clock.timed("exact"):
                originals = intake.spool.load(indices)
                units = [Unit(originals[i], (i,)) for i in indices]
                exact = await ExactStage(
                    config,
                    model,
                    originals,
                    lambda n: progress.advance("exact", n),
                    defer_llm=config.semantic_merge,
                ).run(units)
                del units
                tally.add_exact(exact)
                exact_issues.extend(exact.issues)
            if last:
                phases.end("exact")
            if not semantic_on or embedder is None:
                return _Chunk(originals, exact.units, exact.decisions)
            stage = SemanticStage(
                config,
                model,
                embedder,
                originals,
                contexts,
                on_block_done=lambda n: progress.advance("semantic", n),
                memory=memory,
                engine=engine,
                report=report,
                shared_names=shared_names,
                # The embedding's total starts as the valid records and is corrected
                # chunk by chunk to the distinct texts embedded.
                on_texts=lambda n: progress.add_total("embed", n - len(indices)),
                on_embedded=lambda n: progress.advance("embed", n),
            )
            phases.begin("embed", len(intake.mapped))
            with clock.timed("embed"):
                prepared = await stage.prepare(exact.units)
            if last:
                phases.end("embed")
            return _Chunk(originals, exact.units, exact.decisions, stage, prepared)

        async def decide(chunk: _Chunk) -> list[Unit]:
            """The chunk's output units; its records and logs are gone when it returns."""
            final = chunk.units
            semantic_decisions: list[Decision] = []
            if chunk.stage is not None and chunk.prepared is not None:
                phases.begin("semantic", intake.multi_block_count())
                if llm.available:
                    phases.begin("llm", 0)
                with clock.timed("semantic"):
                    semantic = await chunk.stage.decide(chunk.prepared)
                    tally.add_semantic(semantic)
                    semantic_issues.extend(semantic.issues)
                    semantic_decisions = semantic.decisions
                    logs.clarifications.extend(semantic.clarifications)
                    final = semantic.units
            final = free_merged_ids(final, chunk.originals, taken)
            final_of = {
                chunk.originals[index].relation_id: unit.relation.relation_id
                for unit in final
                for index in unit.members
            }
            logs.exact.extend(final_decision_lines(chunk.exact_decisions, final_of))
            logs.semantic.extend(final_decision_lines(semantic_decisions, final_of))
            return final

        for number, chunk in enumerate(chunks, start=1):
            # One chunk at a time: preparing the next one while this one was decided
            # measured slower on two cores (the embedding already uses both).
            final = await decide(await prepare(chunk.tolist(), number == len(chunks)))
            with clock.timed("write"):
                await write(final)
        with clock.timed("write"):
            await write([Unit(relation, (index,)) for index, relation in intake.passthrough])
        issues = [*intake.issues, *exact_issues, *semantic_issues]
        if report is not None and embedder is not None:
            with clock.timed("semantic"):
                issues.extend(await report.issues(embedder))
        phases.end("semantic", "llm")
    finally:
        if report is not None:
            report.close()

    outputs.sort(key=lambda output: output[0])
    keys = [key for _, key, _ in outputs]
    relations = OutputRelations([data for _, _, data in outputs])
    outputs.clear()
    if len(set(keys)) != len(keys):
        raise AssertionError("two output relations share an id")  # an internal bug, never input
    if not all(output_of):
        raise AssertionError("an input relation has no output")  # an internal bug, never input
    mapping_out = dict(zip(intake.ids, output_of, strict=True))
    log_keys: list[str] = []

    def log_key(name: str) -> str:
        log_keys.append(f"{log_prefix}/{name}" if log_prefix else name)
        return log_keys[-1]

    with clock.timed("write"):
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
        "exact_merge_count": tally.exact_merges,
        "semantic_merge_count": tally.semantic_merges,
        "failed_group_count": tally.failed,
        "llm_needed_group_count": tally.llm_needed_groups,
        "llm_needed_pair_count": tally.llm_needed_pairs,
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
        "seconds": clock.total(),
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
