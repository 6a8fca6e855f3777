"""The only module that knows the stage order.

load + validate ─► remap endpoints ─► exact stage ─► (semantic stage: next release)
─► id mapping ─► write relations, decision log, rejected records
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from relmerge.config import DeduplicateRelationsConfig
from relmerge.errors import ConfigError, InputError
from relmerge.io.records import RawRecord, Rejected, validate_records
from relmerge.io.write import jsonl, write_decisions, write_relations
from relmerge.model import STEP_NAME, Decision, ExtractedRelation, StepIssue
from relmerge.progress import NoProgress, Progress
from relmerge.providers.accounting import AccountingModel
from relmerge.providers.base import LanguageModel
from relmerge.stages.exact import ExactStage
from relmerge.stages.remap import remap_endpoints, validate_entity_mapping
from relmerge.stages.units import Unit
from relmerge.stores.base import ObjectStore

SEMANTIC_UNAVAILABLE = (
    "semantic merge is not available in this version of relmerge; "
    "turn it off with semantic_merge=False (CLI: --no-semantic)"
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
) -> RunOutput:
    """Deduplicate ``raws`` and write the relation files and logs into ``store``."""
    if config.semantic_merge:
        raise ConfigError(SEMANTIC_UNAVAILABLE)
    progress = progress or NoProgress()
    clock = _Clock()
    if not raws:
        raise InputError("the input holds no relation records")
    originals, rejected = validate_records(raws)
    mapping = validate_entity_mapping(entity_id_mapping)
    clock.lap("load")

    remapped = remap_endpoints(originals, mapping)
    units = [Unit(relation, (index,)) for index, relation in remapped.mapped]
    clock.lap("remap")

    model = AccountingModel(llm)
    progress.start("exact", None)
    stage = ExactStage(config, model, originals, lambda n: progress.advance("exact", n))
    exact = await stage.run(units)
    progress.finish("exact")
    clock.lap("exact")

    final = sorted(
        [*exact.units, *(Unit(relation, (index,)) for index, relation in remapped.passthrough)],
        key=lambda unit: unit.first,
    )
    outputs = [unit.relation for unit in final]
    if len({relation.relation_id for relation in outputs}) != len(outputs):
        raise AssertionError("two output relations share an id")  # an internal bug, never input
    mapping_out = _id_mapping(final, originals)

    progress.start("write", len(outputs))
    keys = await write_relations(
        store, config.deduplicated_relations_prefix, outputs, lambda n: progress.advance("write", n)
    )
    if config.decisions_key:
        await write_decisions(store, config.decisions_key, exact.decisions)
    if config.rejected_key:
        await store.put(config.rejected_key, jsonl(item.to_dict() for item in rejected))
    progress.finish("write")
    clock.lap("write")

    issues = [*remapped.issues, *exact.issues]
    result: dict[str, Any] = {
        "step": STEP_NAME,
        "input_record_count": len(raws),
        "rejected_count": len(rejected),
        "input_relation_count": len(originals),
        "output_relation_count": len(outputs),
        "remapped_relation_count": remapped.remapped_count,
        "exact_merge_count": exact.merge_count,
        "semantic_merge_count": 0,
        "failed_group_count": exact.failed_group_count,
        "llm_needed_group_count": exact.llm_needed_group_count,
        "exact_round_count": exact.rounds,
        "semantic_round_count": 0,
        "llm_model": llm.name,
        "llm_requests": model.stats.requests,
        "llm_failed_requests": model.stats.failed_requests,
        "llm_cache_hits": model.stats.cache_hits,
        "tokens": model.stats.tokens(),
        "seconds": clock.total(),
        "issues": [issue.model_dump(mode="json") for issue in issues],
        "config": config.model_dump(mode="json"),
    }
    return RunOutput(
        relations=outputs,
        relation_keys=keys,
        relation_id_mapping=mapping_out,
        result=result,
        decisions=exact.decisions,
        rejected=rejected,
        issues=issues,
    )
