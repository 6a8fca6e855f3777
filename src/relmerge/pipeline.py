"""The only module that knows the stage order.

load + validate ─► remap endpoints ─► exact stage ─► semantic stage
─► id mapping ─► write relations, decision log, clarifications, rejected records
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from relmerge.cache import RunCache
from relmerge.config import DeduplicateRelationsConfig
from relmerge.engines.base import BlockEngine
from relmerge.errors import ConfigError, InputError
from relmerge.ids import merged_relation_id
from relmerge.io.records import RawRecord, Rejected, validate_records
from relmerge.io.write import jsonl, write_decisions, write_relations
from relmerge.model import STEP_NAME, Decision, ExtractedRelation, StepIssue
from relmerge.progress import NoProgress, Progress
from relmerge.prompts.context import EntityContext
from relmerge.providers.accounting import AccountingModel
from relmerge.providers.base import LanguageModel
from relmerge.providers.cached import CachingModel
from relmerge.providers.embedding import EmbeddingModel
from relmerge.providers.limits import BudgetModel
from relmerge.review.memory import AnswerMemory
from relmerge.stages.exact import ExactStage, exact_key
from relmerge.stages.remap import remap_endpoints, validate_entity_mapping
from relmerge.stages.semantic.blocking import block_pair_counts, make_blocks
from relmerge.stages.semantic.stage import SemanticOutcome, SemanticStage
from relmerge.stages.units import Unit
from relmerge.stores.base import ObjectStore

NO_EMBEDDER = (
    "semantic merge needs an embedding model (component 'models.embedding'; CLI: --embedding); "
    "or turn it off with semantic_merge=False (CLI: --no-semantic)"
)


@dataclass(repr=False)
class RunOutput:
    """Everything a run produced; the step turns it into artifacts, the CLI into files."""

    relations: list[ExtractedRelation]
    relation_keys: list[str]
    relation_id_mapping: dict[str, str]
    result: dict[str, Any]
    decisions: list[Decision] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    issues: list[StepIssue] = field(default_factory=list)

    def __repr__(self) -> str:  # the full repr of a large run costs seconds
        return f"RunOutput({len(self.relations)} relations, {len(self.rejected)} rejected)"


class _Clock:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._start = time.perf_counter()
        self._last = self._start

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.seconds[stage] = round(self.seconds.get(stage, 0.0) + now - self._last, 4)
        self._last = now

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


def plan(raws: Sequence[RawRecord], entity_id_mapping: Any) -> dict[str, Any]:
    """Count the work before spending anything: records, exact groups, blocks, pairs.

    No embedding, no LLM, nothing written (``relmerge run --dry-run``).
    """
    if not raws:
        raise InputError("the input holds no relation records")
    originals, rejected = validate_records(raws)
    remapped = remap_endpoints(originals, validate_entity_mapping(entity_id_mapping))
    units = [Unit(relation, (index,)) for index, relation in remapped.mapped]
    groups: dict[tuple[str, str, str, str], int] = {}
    for unit in units:
        key = exact_key(unit.relation)
        groups[key] = groups.get(key, 0) + 1
    return {
        "input_record_count": len(raws),
        "rejected_count": len(rejected),
        "input_relation_count": len(originals),
        "self_loops_after_mapping": len(remapped.passthrough),
        "exact_groups_with_duplicates": sum(1 for n in groups.values() if n > 1),
        "records_in_exact_groups": sum(n for n in groups.values() if n > 1),
        **block_pair_counts(make_blocks(units)),
    }


def free_merged_ids(units: list[Unit], originals: Sequence[ExtractedRelation]) -> list[Unit]:
    """Give a merged relation another id when an unmerged input already has its id.

    Merged ids are predictable (a hash of member ids and name), so an input can carry one;
    the unmerged relation keeps its id (it must, for idempotence) and the merged one is
    re-hashed with a salt until free. Without such an input nothing changes.
    """
    taken = {unit.relation.relation_id for unit in units if len(unit.members) == 1}
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


def _id_mapping(units: Sequence[Unit], originals: Sequence[ExtractedRelation]) -> dict[str, str]:
    mapping = {}
    for unit in units:
        for index in unit.members:
            mapping[originals[index].relation_id] = unit.relation.relation_id
    return {relation.relation_id: mapping[relation.relation_id] for relation in originals}


async def run_pipeline(
    raws: Sequence[RawRecord],
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
) -> RunOutput:
    """Deduplicate ``raws`` and write the relation files and logs into ``store``.

    ``embedder`` is required when ``config.semantic_merge``; ``entities`` (ids, names,
    profiles) are the judge's context. ``before_work`` runs once the input is known to be
    usable and before anything is spent or written (the CLI claims OUT there, so bad input
    never touches an earlier run's outputs). With a ``cache``, an LLM request asked before
    (in this run or an earlier one) is answered from it, not sent again. ``engine`` decides
    the semantic blocks (default: in this process; ``engines.ray_engine.RayEngine``: on Ray).
    """
    if config.semantic_merge and embedder is None:
        raise ConfigError(NO_EMBEDDER)
    progress = progress or NoProgress()
    clock = _Clock()
    if not raws:
        raise InputError("the input holds no relation records")
    originals, rejected = validate_records(raws)
    mapping = validate_entity_mapping(entity_id_mapping)
    if config.strict and rejected:
        raise InputError(strict_failure(rejected))
    if rejected and not originals:  # a wrong file, not a batch with a few bad records
        raise InputError(
            f"none of the {len(rejected)} input records is a valid relation; "
            f"first: {rejected[0].origin}: {rejected[0].reason}"
        )
    if before_work is not None:
        await before_work()
    clock.lap("load")

    remapped = remap_endpoints(originals, mapping)
    units = [Unit(relation, (index,)) for index, relation in remapped.mapped]
    clock.lap("remap")

    budget = BudgetModel(llm, config.max_llm_requests, config.max_tokens)
    model = AccountingModel(CachingModel(budget, cache) if cache is not None else budget)
    progress.start("exact", None)
    stage = ExactStage(
        config,
        model,
        originals,
        lambda n: progress.advance("exact", n),
        defer_llm=config.semantic_merge,
    )
    exact = await stage.run(units)
    progress.finish("exact")
    clock.lap("exact")

    deduplicated = exact.units
    semantic = SemanticOutcome(units=exact.units)
    if config.semantic_merge and embedder is not None:
        contexts = canonical_entities(entities, mapping)
        progress.start("semantic", None)
        semantic = await SemanticStage(
            config,
            model,
            embedder,
            originals,
            contexts,
            on_block_done=lambda n: progress.advance("semantic", n),
            memory=memory,
            engine=engine,
        ).run(exact.units)
        progress.finish("semantic")
        deduplicated = semantic.units
        clock.lap("semantic")

    final = sorted(
        [*deduplicated, *(Unit(relation, (index,)) for index, relation in remapped.passthrough)],
        key=lambda unit: unit.first,
    )
    final = free_merged_ids(final, originals)
    outputs = [unit.relation for unit in final]
    if len({relation.relation_id for relation in outputs}) != len(outputs):
        raise AssertionError("two output relations share an id")  # an internal bug, never input
    mapping_out = _id_mapping(final, originals)

    progress.start("write", len(outputs))
    keys = await write_relations(
        store, config.deduplicated_relations_prefix, outputs, lambda n: progress.advance("write", n)
    )
    decisions = [*exact.decisions, *semantic.decisions]
    if config.decisions_key:
        await write_decisions(store, config.decisions_key, decisions)
    if config.clarifications_key:
        await store.put(config.clarifications_key, jsonl(semantic.clarifications))
    if config.rejected_key:
        await store.put(config.rejected_key, jsonl(item.to_dict() for item in rejected))
    progress.finish("write")
    clock.lap("write")

    issues = [*remapped.issues, *exact.issues, *semantic.issues]
    result: dict[str, Any] = {
        "step": STEP_NAME,
        "input_record_count": len(raws),
        "rejected_count": len(rejected),
        "input_relation_count": len(originals),
        "output_relation_count": len(outputs),
        "remapped_relation_count": remapped.remapped_count,
        "exact_merge_count": exact.merge_count,
        "semantic_merge_count": semantic.merge_count,
        "failed_group_count": exact.failed_group_count + semantic.failed_block_count,
        "llm_needed_group_count": exact.llm_needed_group_count,
        "llm_needed_pair_count": semantic.llm_needed_pair_count,
        "clarification_count": len(semantic.clarifications),
        "exact_round_count": exact.rounds,
        "semantic_round_count": semantic.rounds,
        "blocking": semantic.pair_counts,
        "decisions_by_tier": dict(sorted(semantic.tier_counts.items())),
        "embedding_model": embedder.name
        if embedder is not None and config.semantic_merge
        else None,
        "llm_model": llm.name,
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
        "seconds": clock.total(),
        "issues": [issue.model_dump(mode="json") for issue in issues],
        "config": config.model_dump(mode="json"),
    }
    return RunOutput(
        relations=outputs,
        relation_keys=keys,
        relation_id_mapping=mapping_out,
        result=result,
        decisions=decisions,
        rejected=rejected,
        issues=issues,
    )
