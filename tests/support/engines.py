"""What the engine tests share: the dev set run through ``run_pipeline`` on an engine
(into memory, or into a directory that tells the files the driver put from those its
workers wrote), "the same outputs" for two such runs, and the LLM endpoints they are run
against."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from relmerge.config import DeduplicateRelationsConfig
from relmerge.engines.base import ChunkEngine
from relmerge.errors import ProviderError
from relmerge.io.load import read_entities, read_entity_mapping, read_input
from relmerge.providers.base import LanguageModel, LLMRequest, LLMResult, NoLanguageModel
from relmerge.providers.embedding import CachedEmbedder, EmbeddingModel, HashEmbedder
from relmerge.run.pipeline import run_pipeline
from relmerge.run.result import RunOutput
from relmerge.stores.local import LocalStore
from relmerge.stores.memory import MemoryStore
from tests.support.dev_cli import DEV

EngineRun = tuple[RunOutput, MemoryStore]

# Result figures two runs of the same batch and settings share, whatever the engine.
SAME_RESULT_KEYS = (
    "output_relation_count",
    "semantic_merge_count",
    "llm_requests",
    "llm_invalid_answers",
    "tokens",
    "clarification_count",
    "decisions_by_tier",
    "issues",
)


async def dev_engine_run(
    llm: LanguageModel,
    engine: ChunkEngine,
    config: DeduplicateRelationsConfig | None = None,
    embedder: EmbeddingModel | None = None,
) -> EngineRun:
    """The dev set (mapping, entities) into a memory store; hash vectors by default."""
    store = MemoryStore()
    output = await run_pipeline(
        await read_input(DEV / "relations.jsonl"),
        read_entity_mapping(DEV / "entity_id_mapping.json"),
        config or DeduplicateRelationsConfig(),
        llm,
        store,
        embedder=embedder or CachedEmbedder(HashEmbedder()),
        entities=read_entities(DEV / "entities.jsonl"),
        engine=engine,
    )
    return output, store


class Watched(LocalStore):
    """The run's output directory; remembers the keys the driver itself put."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.put_by_driver: list[str] = []

    async def put(self, key: str, data: bytes) -> None:
        self.put_by_driver.append(key)
        await super().put(key, data)

    async def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        self.put_by_driver.extend(key for key, _ in items)
        await super().put_many(items)


async def run_into(
    out: Path,
    engine: ChunkEngine,
    relations: Path = DEV / "relations.jsonl",
    llm: LanguageModel | None = None,
    config: DeduplicateRelationsConfig | None = None,
) -> tuple[RunOutput, Watched]:
    """The dev set (or ``relations``) into the directory ``out``, in many chunks."""
    store = Watched(out)
    output = await run_pipeline(
        await read_input(relations),
        read_entity_mapping(DEV / "entity_id_mapping.json"),
        config or DeduplicateRelationsConfig(records_per_chunk=60),
        llm or NoLanguageModel(),
        store,
        embedder=CachedEmbedder(HashEmbedder()),
        entities=read_entities(DEV / "entities.jsonl"),
        engine=engine,
    )
    return output, store


def relation_files_put(store: Watched) -> list[str]:
    """The relation files the driver itself put into ``store``."""
    return [key for key in store.put_by_driver if key.startswith("deduplicated_relations/")]


def assert_same_outputs(one: EngineRun, other: EngineRun, *more_keys: str) -> None:
    """Relation files, logs, mapping and the result's figures (``SAME_RESULT_KEYS`` and
    ``more_keys``) are those of the other run."""
    (a, store_a), (b, store_b) = one, other
    assert store_a.objects == store_b.objects  # relation files, decisions, clarifications
    assert a.relation_id_mapping == b.relation_id_mapping
    for key in (*SAME_RESULT_KEYS, *more_keys):
        assert a.result[key] == b.result[key], key


class InFlight:
    """Wraps a model; records the most requests it ever had in flight at once."""

    def __init__(self, inner: LanguageModel, pause: float) -> None:
        self.inner = inner
        self.name = inner.name
        self.available = inner.available
        self.pause = pause
        self.now = 0
        self.most = 0

    async def invoke(self, request: LLMRequest) -> LLMResult:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            await asyncio.sleep(self.pause)
            return await self.inner.invoke(request)
        finally:
            self.now -= 1


class Refused:
    """An endpoint that cannot work: every request is refused, not retryable (a 401)."""

    name = "refused"
    available = True

    async def invoke(self, request: LLMRequest) -> LLMResult:
        raise ProviderError("401 unauthorized", retryable=False)


class Unreachable:
    """An endpoint that never answers: every request fails in transport, at once."""

    name = "unreachable"
    available = True

    def __init__(self) -> None:
        self.calls = 0

    async def invoke(self, request: LLMRequest) -> LLMResult:
        self.calls += 1
        raise ProviderError("connection refused", retryable=True, transport=True)
