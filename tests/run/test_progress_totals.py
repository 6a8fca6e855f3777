"""Every phase a run reports reaches exactly the total it announced, however the batch
is cut into chunks, and LLM requests are counted as they are sent and answered."""

from __future__ import annotations

from pathlib import Path

import pytest

from relmerge.config import DeduplicateRelationsConfig
from relmerge.io.load import JsonlInput, read_entities, read_entity_mapping
from relmerge.io.records import RawRecord
from relmerge.providers.base import NoLanguageModel
from relmerge.providers.embedding import HashEmbedder
from relmerge.run.pipeline import run_pipeline
from relmerge.stores.memory import MemoryStore
from tests.factories import record
from tests.run.test_chunks import DEV, needs_dev
from tests.support.gold_judge import dev_gold_judge


class Recorder:
    """A :class:`relmerge.progress.Progress` that keeps what it was told."""

    def __init__(self) -> None:
        self.totals: dict[str, int | None] = {}
        self.done: dict[str, int] = {}
        self.counts: dict[str, dict[str, int]] = {}
        self.order: list[str] = []
        self.finished: list[str] = []

    def start(self, stage: str, total: int | None) -> None:
        assert stage not in self.totals, f"{stage} started twice"
        self.totals[stage], self.done[stage] = total, 0
        self.order.append(stage)

    def advance(self, stage: str, amount: int = 1) -> None:
        assert stage in self.totals and stage not in self.finished
        self.done[stage] += amount

    def add_total(self, stage: str, amount: int) -> None:
        total = self.totals[stage]
        assert total is not None
        self.totals[stage] = total + amount

    def count(self, stage: str, name: str, amount: int = 1) -> None:
        counts = self.counts.setdefault(stage, {})
        counts[name] = counts.get(name, 0) + amount

    def finish(self, stage: str) -> None:
        self.finished.append(stage)


@needs_dev
@pytest.mark.parametrize("records_per_chunk", [50_000, 40])
async def test_each_phase_reaches_its_total(records_per_chunk: int) -> None:
    recorder = Recorder()
    output = await run_pipeline(
        JsonlInput(DEV / "relations.jsonl"),
        read_entity_mapping(DEV / "entity_id_mapping.json"),
        DeduplicateRelationsConfig(records_per_chunk=records_per_chunk),
        dev_gold_judge(DEV),
        MemoryStore(),
        recorder,
        HashEmbedder(),
        read_entities(DEV / "entities.jsonl"),
    )
    phases = ["read", "exact", "embed", "semantic", "llm", "write"]
    assert recorder.order == phases
    assert sorted(recorder.finished) == sorted(phases)
    for stage in phases:
        assert recorder.done[stage] == recorder.totals[stage], stage
    assert recorder.totals["read"] == Path(DEV / "relations.jsonl").stat().st_size
    assert recorder.totals["write"] == output.result["output_relation_count"]
    assert recorder.totals["llm"] == output.result["llm_requests"] > 0
    assert recorder.totals["semantic"] >= output.result["blocking"]["multi_record_blocks"]


class _ThreeHooks:
    """A progress object written for the first protocol: start, advance, finish."""

    def __init__(self) -> None:
        self.finished: list[str] = []

    def start(self, stage: str, total: int | None) -> None:
        pass

    def advance(self, stage: str, amount: int = 1) -> None:
        pass

    def finish(self, stage: str) -> None:
        self.finished.append(stage)


async def test_a_progress_object_with_fewer_hooks_still_works() -> None:
    progress = _ThreeHooks()
    records = [record("r1"), record("r2", description="Another fact.")]
    output = await run_pipeline(
        [RawRecord(origin=f"line {n}", data=r) for n, r in enumerate(records, start=1)],
        None,
        DeduplicateRelationsConfig(semantic_merge=False),
        NoLanguageModel(),
        MemoryStore(),
        progress,  # type: ignore[arg-type]
    )
    assert output.result["output_relation_count"] == 2
    assert progress.finished == ["load", "exact", "write"]
