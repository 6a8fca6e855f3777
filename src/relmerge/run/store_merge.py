"""``StoreMerge``: deduplicate a batch against the graph a relation store keeps (DESIGN §8).

    intake (as run) ─► skip input ids the store folded in ─► read the batch's pairs
    ─► one pass of the run's kernel (stages/chunk.work_chunk) over the stored relations
       of those pairs ("pinned": never merged nor judged against each other) and the new
       ones ─► fold (run/fold.py) ─► apply_batch ─► on conflict: re-read and re-decide
       the pairs that moved (bounded), then apply again

One kernel, no second copy: new-vs-new and new-vs-stored pairs meet the same tiers,
guards, LLM judge (with both entities' profiles: the store's and the batch's),
clarifications and remembered answers as in ``relmerge run``. The batch id is a digest
of the input and the settings, so the same batch merged again is ``already_applied``
and changes nothing; its mapping and decisions then come from the store. The model's
canary answers feed a sequential test kept in the store across batches
(``run.store_canaries``): a model it stops is asked nothing more, and its pairs go to
clarifications with the reason.
"""

from __future__ import annotations

import hashlib
import shlex
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from relmerge.cache import RunCache
from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.memory import Remembered
from relmerge.decide.retry import UNAVAILABLE
from relmerge.errors import StoreError, UndoRefusedError
from relmerge.graphstore.base import (
    ApplyResult,
    Batch,
    Member,
    Pair,
    PairState,
    RelationStore,
    relation_pair,
)
from relmerge.io.records import RawRecord, Rejected
from relmerge.model import EntityContext, ExtractedRelation, StepIssue
from relmerge.progress import Progress, as_progress
from relmerge.providers.base import LanguageModel
from relmerge.providers.embedding import EmbeddingModel
from relmerge.providers.gate import CanaryGateModel
from relmerge.providers.stack import ModelStack, build_model_stack
from relmerge.review.memory import AnswerMemory
from relmerge.run.fold import Plan, plan_writes
from relmerge.run.intake import Intake, canonical_entities, check_intake, read_input
from relmerge.run.store_canaries import StoreCanaries
from relmerge.run.store_vectors import StoreEmbedder
from relmerge.run.writer import final_decision_lines
from relmerge.stages.chunk import ChunkResult, ChunkSettings, ChunkTask, Tally, work_chunk
from relmerge.stages.remap import validate_entity_mapping

CLARIFICATION = "clarification"  # a batch's decision entry that holds a clarification
# A batch's decision entry: how many groups the model never answered (unreachable). The
# batch is merged again, asking them, by the next merge of the same input with a model.
UNANSWERED = "llm_unavailable_groups"


@dataclass(frozen=True)
class StoreMergeResult:
    """A merge's figures: the batch's input, what it did to the store, and its cost."""

    batch_id: str
    status: str  # applied | already_applied
    store_url: str
    input_record_count: int
    rejected_count: int
    input_relation_count: int
    already_folded_count: int  # input ids an earlier batch folded in (skipped)
    inserted_count: int
    joined_count: int  # stored relations a new relation joined (folded in)
    joined_changed_count: int  # of those, the ones whose stored record changed
    entities_decided: int  # endpoints of the relations the merge decided
    entities_with_profile: int  # of those, with a profile (the store's or the batch's)
    pairs_read: int
    stored_relations_read: int
    conflict_retries: int
    exact_merge_count: int
    semantic_merge_count: int
    llm_needed_pair_count: int
    clarification_count: int
    llm_unavailable_group_count: int  # groups the model never answered: asked next time
    llm_requests: int
    llm_cache_hits: int
    vectors_from_store: int
    vectors_computed: int
    seconds: float
    # The model's canaries (``run.store_canaries``): this batch's, and the store's test.
    canaries: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class StoreMergeOutput:
    """What a merge gives back: its figures, every valid input id's stored id, the
    relations it inserted or changed (as stored now), and its logs."""

    result: StoreMergeResult
    mapping: dict[str, str]
    relations: list[ExtractedRelation]
    decisions: list[dict[str, Any]]
    clarifications: list[dict[str, Any]]
    rejected: list[Rejected]
    issues: list[StepIssue] = field(default_factory=list)


@dataclass
class _Decided:
    """The kernel's work on some pairs: the writes, logs and counts, by pair."""

    plan: Plan = field(default_factory=Plan)
    decisions: dict[Pair, list[dict[str, Any]]] = field(default_factory=dict)
    clarifications: dict[Pair, list[dict[str, Any]]] = field(default_factory=dict)
    issues: list[StepIssue] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)
    read: int = 0

    def drop(self, pairs: Iterable[Pair], pair_of_id: Mapping[str, Pair]) -> None:
        """Forget what was decided about ``pairs`` (they are decided again)."""
        gone = set(pairs)
        plan = self.plan
        for table in (plan.inserts, plan.updates):
            for key in [k for k, r in table.items() if relation_pair(r) in gone]:
                del table[key]
        for key in [k for k in plan.mapping if pair_of_id.get(k) in gone]:
            del plan.mapping[key]
        for pair in gone:
            self.decisions.pop(pair, None)
            self.clarifications.pop(pair, None)


def as_raw_records(items: Iterable[Any], origin: str = "input") -> Iterable[RawRecord]:
    """Relations (objects or JSON dicts) as the intake takes them."""
    for number, item in enumerate(items, 1):
        data = item.to_dict() if isinstance(item, ExtractedRelation) else item
        yield item if isinstance(item, RawRecord) else RawRecord(f"{origin}:{number}", data)


class StoreMerge:
    """Merge batches into ``store`` with the run's kernel (see the module).

    ``llm``: the provider (the merge builds its stack, ``providers.stack``; ``cache``:
    answers kept across runs); ``embedder``: required with ``config.semantic_merge``
    (its vectors are cached in the store); ``entities``: the batch's entity profiles
    (added to the store's); ``memory``: a person's answers (``relmerge review``).
    ``max_retries``: how often pairs another merge changed meanwhile are re-decided.
    """

    def __init__(
        self,
        store: RelationStore,
        config: DeduplicateRelationsConfig | None = None,
        llm: LanguageModel | None = None,
        embedder: EmbeddingModel | None = None,
        *,
        entities: Sequence[EntityContext] = (),
        memory: Remembered | None = None,
        cache: RunCache | None = None,
        max_retries: int = 8,
    ) -> None:
        from relmerge.providers.base import NoLanguageModel

        self.store = store
        self.config = config or DeduplicateRelationsConfig()
        self.llm = llm or NoLanguageModel()
        self.embedder = embedder
        self.entities = entities
        self.memory = memory
        self.cache = cache
        self.max_retries = max_retries
        self.input_digest = ""  # the last merge's batch id without the answers
        if self.config.semantic_merge and embedder is None:
            from relmerge.errors import ConfigError
            from relmerge.run.pipeline import NO_EMBEDDER

            raise ConfigError(NO_EMBEDDER)

    async def merge(
        self,
        records: Iterable[Any],
        entity_id_mapping: Any = None,
        *,
        batch_id: str | None = None,
        progress: Progress | None = None,
        before_work: Callable[[str], Awaitable[None]] | None = None,
        replaces: str | None = None,
        on_write: Callable[[int], None] | None = None,
    ) -> StoreMergeOutput:
        """Merge ``records`` (RawRecords, relations or their dicts) into the store.

        ``before_work`` hears the batch id once the input is known to be usable, before
        anything is decided or written (the CLI claims OUT there). ``replaces``: an
        earlier merge of the same input, decided without the answers a person has given
        since; it is undone first (refused when later batches built on it), so that the
        answers apply. ``on_write`` hears of the batch's rows as they are written."""
        started = time.perf_counter()
        mapping = validate_entity_mapping(entity_id_mapping)
        intake = read_input(as_raw_records(records), mapping, self.config, as_progress(progress))
        try:
            check_intake(intake, self.config)
            inputs = _inputs(intake)
            self.input_digest = self.batch_id(inputs, mapping, answers=False)
            batch_id = batch_id or self.batch_id(inputs, mapping)
            entities = canonical_entities(self.entities, mapping)
            replacing = replaces is not None and replaces != batch_id
            if replacing:  # refused before anything is claimed or written
                replacing = await self._can_replace(str(replaces))
            if before_work is not None:
                await before_work(batch_id)
            if replacing:
                await self.store.undo(str(replaces))
            merging = _Merge(self, intake, inputs, batch_id, entities, started, progress)
            merging.on_write = on_write
            return await merging.run()
        finally:
            intake.spool.close()

    async def _can_replace(self, replaces: str) -> bool:
        """Whether the earlier merge is applied, so undone first; refused (nothing
        changed) when later batches built on it."""
        earlier = await self.store.batch(replaces)
        if earlier is None or earlier.status != "applied":
            return False
        try:
            await self.store.undo(replaces, check_only=True)
        except UndoRefusedError as error:
            later, url = ", ".join(error.later), shlex.quote(self.store.url)
            raise UndoRefusedError(
                f"the answers cannot be applied by merging this batch again: its earlier "
                f"merge {replaces} must be undone first, and later batch(es) {later} built "
                f"on it. Undo those first (relmerge store undo {url} BATCH, newest "
                "first), then run this again; nothing was changed",
                error.later,
            ) from None
        return True

    def batch_id(
        self, inputs: Sequence[ExtractedRelation], mapping: Any, answers: bool = True
    ) -> str:
        """``merge-`` and a digest of the input, the mapping, the settings, the models and
        (``answers``) a person's answers: answers given since make it another batch."""
        digest = hashlib.sha256()
        for relation in inputs:
            digest.update(relation.to_json() + b"\n")
        settings = self.config.model_dump(mode="json", exclude={"concurrency"})
        named = [self.llm.name, self.embedder.name if self.embedder else None]
        entities = [entity.__dict__ for entity in self.entities]
        memory = self.memory
        given = (
            [[key, str(memory.get(key))] for key in sorted(memory.remembered_keys())]
            if answers and isinstance(memory, AnswerMemory)
            else []
        )
        digest.update(orjson.dumps([mapping, settings, named, entities, given], default=str))
        return "merge-" + digest.hexdigest()[:24]


def _inputs(intake: Intake) -> list[ExtractedRelation]:
    """The valid relations, in input order (self-loops after mapping included)."""
    loaded = intake.spool.load(list(intake.mapped))
    loaded.update(dict(intake.passthrough))
    return [loaded[index] for index in sorted(loaded)]


class _Merge:
    """One merge's state, from the input read to the batch applied."""

    def __init__(
        self,
        owner: StoreMerge,
        intake: Intake,
        inputs: list[ExtractedRelation],
        batch_id: str,
        entities: dict[str, EntityContext],
        started: float,
        progress: Progress | None = None,
    ) -> None:
        self.owner = owner
        self.progress = as_progress(progress)
        self.store = owner.store
        self.config = owner.config
        self.intake = intake
        self.inputs = inputs
        self.batch_id = batch_id
        self.entities = entities
        self.started = started
        self.models: ModelStack = build_model_stack(
            owner.llm, owner.config, cache=owner.cache, progress=self.progress
        )
        self.embedder = (
            StoreEmbedder(owner.embedder, self.store) if owner.embedder is not None else None
        )
        self.pair_of_id = {r.relation_id: relation_pair(r) for r in inputs}
        self.known: dict[str, str] = {}  # input ids already in the store -> stored id
        self.retries = 0
        self.changed = 0  # stored relations the applied batch changed
        self.on_write: Callable[[int], None] | None = None
        self.store_entities: dict[str, EntityContext] = {}  # the endpoints' stored profiles
        self.endpoints = self.profiled = 0  # the batch's new endpoints; with a profile
        self.canaries = StoreCanaries(self.store, owner.config, self.models.model, self.models.gate)

    async def run(self) -> StoreMergeOutput:
        earlier = await self.store.batch(self.batch_id)
        if earlier is not None and earlier.status == "applied" and not await self._ask_again():
            return await self._already_applied()
        await self.canaries.load()
        todo = await self._not_stored(self.inputs)
        ends = {e for r in todo for e in (r.source_entity_id, r.target_entity_id)}
        self.store_entities = await self.store.entities(sorted(ends))
        self.profiled = len(ends & (set(self.store_entities) | set(self.entities)))
        self.endpoints = len(ends)
        decided = _Decided()
        pending = sorted({relation_pair(r) for r in todo})
        states: dict[Pair, PairState] = {}
        while True:
            states.update(await self._read_pairs(pending))
            await self._decide(todo, pending, states, decided)
            applied = await self._apply(self._batch(decided, states))
            if applied.status == "already_applied":
                return await self._already_applied()
            if applied.status == "applied":
                return await self._output(applied, decided, states)
            if self.retries >= self.owner.max_retries:
                raise StoreError(
                    f"batch {self.batch_id}: pairs kept changing under other merges "
                    f"({len(applied.conflicts)} after {self.retries} retries); run it again"
                )
            self.retries += 1
            pending = list(applied.conflicts)
            decided.drop(pending, self.pair_of_id)
            todo = [r for r in todo if r.relation_id not in await self._newly_folded(pending)]

    async def _ask_again(self) -> bool:
        """The applied batch left groups its unreachable model never answered, and a
        model is given now: undo it (refused when later batches built on it: then
        ``reconcile --pending`` asks them) so that it is merged again, asking them."""
        if not self.owner.llm.available:
            return False
        logs = await self.store.batch_decisions(self.batch_id)
        if not any(line.get(UNANSWERED) for line in logs):
            return False
        try:
            await self.store.undo(self.batch_id)
        except UndoRefusedError:
            return False
        return True

    async def _read_pairs(self, pairs: Sequence[Pair]) -> dict[Pair, PairState]:
        """The stored relations of ``pairs`` (the ``pairs`` phase)."""
        progress = self.progress
        progress.start("pairs", len(pairs))
        states = await self.store.relations_for_pairs(pairs)
        progress.advance("pairs", len(pairs))
        progress.finish("pairs")
        return states

    async def _apply(self, batch: Batch) -> ApplyResult:
        """``apply_batch``, its rows counted in the ``write`` phase."""
        progress = self.progress
        progress.start("write", len(batch.inserts) + len(batch.updates))

        def written(rows: int) -> None:
            progress.advance("write", rows)
            if self.on_write is not None:
                self.on_write(rows)

        try:
            return await self.store.apply_batch(batch, written)
        finally:
            progress.finish("write")

    async def _not_stored(self, inputs: list[ExtractedRelation]) -> list[ExtractedRelation]:
        """The inputs still to decide: not folded in by an earlier batch, and not stored
        as they are under their own id (a store loaded with them)."""
        ids = [r.relation_id for r in inputs]
        self.known.update(await self.store.folded(ids))
        rest = [r for r in inputs if r.relation_id not in self.known]
        stored = await self.store.relations_by_id([r.relation_id for r in rest])
        for relation in rest:
            if stored.get(relation.relation_id) == relation:
                self.known[relation.relation_id] = relation.relation_id
        return [r for r in rest if r.relation_id not in self.known]

    async def _newly_folded(self, pairs: Sequence[Pair]) -> set[str]:
        """Inputs of ``pairs`` that another merge folded in meanwhile."""
        wanted = set(pairs)
        ids = [i for i, pair in self.pair_of_id.items() if pair in wanted and i not in self.known]
        found = await self.store.folded(ids)
        self.known.update(found)
        return set(found)

    async def _decide(
        self,
        todo: list[ExtractedRelation],
        pairs: Sequence[Pair],
        states: Mapping[Pair, PairState],
        decided: _Decided,
    ) -> None:
        """The kernel over ``pairs``: their stored relations pinned first, then the new."""
        wanted = set(pairs)
        new = [r for r in todo if relation_pair(r) in wanted and not _self_loop(r)]
        loops = [r for r in todo if relation_pair(r) in wanted and _self_loop(r)]
        touched = {relation_pair(r) for r in new}
        pinned = [s for p in pairs if p in touched for s in states[p].relations]
        originals = [*pinned, *new]
        decided.read += len(pinned)
        stored_ids = {r.relation_id for p in pairs for r in states[p].relations}
        taken = stored_ids | set(self.pair_of_id) | set(decided.plan.inserts)
        if new:
            result = await self._work(originals, len(pinned))
            plan = plan_writes(result.outputs, originals, len(pinned), taken, stored_ids)
            self._log(result, plan, decided)
            decided.plan.add(plan)
        as_is = (((i,), r.relation_id, r.to_json()) for i, r in enumerate(loops))
        decided.plan.add(plan_writes(as_is, loops, 0, taken, stored_ids))

    async def _work(self, originals: list[ExtractedRelation], stored: int) -> ChunkResult:
        config = self.config
        settings = ChunkSettings(
            config,
            {**self.store_entities, **self.entities},
            self.owner.memory,
            self.intake.shared_names(config.generic_name_share),
            semantic=config.semantic_merge and self.embedder is not None,
            report=False,
        )
        task = ChunkTask(0, list(range(len(originals))), originals, None, frozenset(range(stored)))
        canaries = self.canaries
        if not canaries.distrusted:
            result = await self._worked(task, settings, self.models.model)
            await canaries.measure(result)
            if not canaries.withheld or result.llm_questions == 0:
                return result
            canaries.reworked = True  # its merges are not applied: decided again without
        reason = canaries.reason or ""
        if canaries.distrusted and self.models.gate is not None:
            self.models.gate.close(reason)  # no more requests to a distrusted model
        gated = CanaryGateModel(self.models.model, reason)  # cached answers refused too
        return await self._worked(task, settings, gated)

    async def _worked(
        self, task: ChunkTask, settings: ChunkSettings, model: LanguageModel
    ) -> ChunkResult:
        """The kernel over the chunk, its phases shown as ``relmerge run`` shows them."""
        progress = self.progress
        phases = ["exact", *(["embed", "semantic"] if settings.semantic else [])]
        phases += ["llm"] if self.owner.llm.available else []
        totals = {"embed": len(task.indices), "llm": 0}  # as ``run`` starts them
        for phase in phases:
            progress.start(phase, totals.get(phase))
        try:
            return await work_chunk(task, settings, model, self.embedder, progress)
        finally:
            for phase in phases:
                progress.finish(phase)

    def _log(self, result: ChunkResult, plan: Plan, decided: _Decided) -> None:
        """The chunk's decisions (final output ids) and clarifications, by pair."""
        decided.tally.add(result.tally)
        decided.issues.extend(result.exact_issues + result.semantic_issues)
        final_of = dict(plan.mapping)
        for relation in [*plan.updates.values()]:
            final_of.setdefault(relation.relation_id, relation.relation_id)
        lines = [*result.exact_decisions, *result.semantic_decisions]
        for line in final_decision_lines(lines, _Identity(final_of)):
            decided.decisions.setdefault(self._pair(line["member_ids"]), []).append(line)
        for item in result.clarifications:
            decided.clarifications.setdefault(self._pair(item["member_ids"]), []).append(item)

    def _pair(self, member_ids: Sequence[str]) -> Pair:
        for member in member_ids:
            if member in self.pair_of_id:
                return self.pair_of_id[member]
        return ("", "")

    def _batch(self, decided: _Decided, states: Mapping[Pair, PairState]) -> Batch:
        mapping = {**self.known, **decided.plan.mapping}
        logs = [line for lines in decided.decisions.values() for line in lines]
        logs += [
            {CLARIFICATION: item} for items in decided.clarifications.values() for item in items
        ]
        unanswered = _unavailable(decided.issues)
        if unanswered:
            logs.append({UNANSWERED: unanswered})
        return Batch(
            self.batch_id,
            {pair: state.version for pair, state in states.items()},
            list(decided.plan.inserts.values()),
            list(decided.plan.updates.values()),
            mapping,
            logs,
            list(self.entities.values()),
            fingerprint=self.batch_id,
            members=self._members(decided.plan.mapping),
        )

    def _members(self, mapping: Mapping[str, str]) -> list[Member]:
        """The input records this batch folds in, as they came (after the entity
        mapping): kept with the stored id each joined, so a retract can rebuild it."""
        records = {r.relation_id: r for r in reversed(self.inputs) if r.relation_id in mapping}
        ordered = dict.fromkeys(r.relation_id for r in self.inputs if r.relation_id in records)
        return [Member(records[i], mapping[i]) for i in ordered]

    async def _already_applied(self) -> StoreMergeOutput:
        """The earlier application's mapping and logs, read back from the store."""
        mapping = await self.store.batch_mapping(self.batch_id)
        mapping.update(await self.store.folded([r.relation_id for r in self.inputs]))
        self.known.update(mapping)  # every input id is in the store already
        logs = await self.store.batch_decisions(self.batch_id)
        return await self._finish("already_applied", mapping, logs, _Decided(), {})

    async def _output(
        self, applied: ApplyResult, decided: _Decided, states: Mapping[Pair, PairState]
    ) -> StoreMergeOutput:
        if self.embedder is not None:
            await self.embedder.save()
        logs = self._batch(decided, states).decisions
        mapping = {**self.known, **decided.plan.mapping}
        self.changed = applied.counts.updated
        return await self._finish("applied", mapping, list(logs), decided, states)

    async def _finish(
        self,
        status: str,
        mapping: dict[str, str],
        logs: Sequence[Mapping[str, Any]],
        decided: _Decided,
        states: Mapping[Pair, PairState],
    ) -> StoreMergeOutput:
        unanswered = sum(int(line.get(UNANSWERED, 0)) for line in logs)
        logs = [line for line in logs if UNANSWERED not in line]
        decisions = [dict(line) for line in logs if CLARIFICATION not in line]
        clarifications = [dict(line[CLARIFICATION]) for line in logs if CLARIFICATION in line]
        ordered = {
            r.relation_id: mapping[r.relation_id] for r in self.inputs if r.relation_id in mapping
        }
        touched = list(dict.fromkeys(ordered.values()))
        stored = await self.store.relations_by_id(touched)
        relations = [stored[i] for i in touched if i in stored]
        plan, tally, stats = decided.plan, decided.tally, self.models.stats
        embedder = self.embedder
        result = StoreMergeResult(
            batch_id=self.batch_id,
            status=status,
            store_url=self.store.url,
            input_record_count=self.intake.record_count,
            rejected_count=len(self.intake.rejected),
            input_relation_count=len(self.inputs),
            already_folded_count=len(self.known),
            inserted_count=len(plan.inserts),
            joined_count=len(plan.updates),
            joined_changed_count=self.changed,
            entities_decided=self.endpoints,
            entities_with_profile=self.profiled,
            pairs_read=len(states),
            stored_relations_read=decided.read,
            conflict_retries=self.retries,
            exact_merge_count=tally.exact_merges,
            semantic_merge_count=tally.semantic_merges,
            llm_needed_pair_count=tally.llm_needed_pairs,
            clarification_count=len(clarifications),
            llm_unavailable_group_count=unanswered,
            llm_requests=stats.requests,
            llm_cache_hits=stats.cache_hits,
            vectors_from_store=embedder.from_store if embedder else 0,
            vectors_computed=(embedder.computed if embedder else 0),
            seconds=round(time.perf_counter() - self.started, 3),
            canaries=self.canaries.figures(),
        )
        return StoreMergeOutput(
            result,
            ordered,
            relations,
            decisions,
            clarifications,
            list(self.intake.rejected),
            [*self.intake.issues, *decided.issues],
        )


class _Identity(dict[str, str]):
    """A mapping that gives an id not in it as itself (a stored member's final id)."""

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key, key)


def _unavailable(issues: Iterable[StepIssue]) -> int:
    """Groups the model never answered (unreachable, or not in time)."""
    return sum(1 for issue in issues if issue.code == UNAVAILABLE)


def _self_loop(relation: ExtractedRelation) -> bool:
    return relation.source_entity_id == relation.target_entity_id
