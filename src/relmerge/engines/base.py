"""Where a run's chunks are worked: the engine protocol, and what every engine shares.

A chunk of whole blocks (the records of some canonical endpoint pairs) is the unit of
distribution: ``relmerge.stages.chunk.work_chunk`` runs its exact stage, embedding and
block decisions wherever an engine puts it — in this process (``local.LocalEngine``), in
worker processes on this machine (``processes.ProcessEngine``) or in Ray tasks
(``ray_engine.RayEngine``) — and the results come back in plan order, so every engine
gives the same outputs. The driver (``relmerge.run``) reads, serves the LLM (the run's
one model stack) and writes.

A new engine implements :class:`ChunkEngine`, applies what a chunk worked elsewhere
brings back with :func:`collect`, and embeds the driver's own texts with
:func:`embed_driver_texts`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from relmerge.cputime import CpuMeter
from relmerge.engines.outputs import SharedOutputs
from relmerge.progress import Progress
from relmerge.providers.base import InvalidAnswerCounter, LanguageModel, innermost
from relmerge.providers.cached import persistent_layer
from relmerge.providers.embedding import EmbeddingModel, Rebuildable, Recipe, Vectors
from relmerge.stages.chunk import ChunkResult, ChunkSettings, ChunkTask


@dataclass
class ChunkRun:
    """What an engine needs to work a run's chunks: the shared settings, the driver's
    model (its stack: budget, cache, accounting; the one door to the LLM) and embedder,
    where progress goes (phases ``exact``, ``embed``, ``semantic``), and the driver's CPU
    meter. ``share``: where an engine's workers may write the relation files themselves
    (``OutputWriter.share``: None where only the driver can); None: the driver writes."""

    settings: ChunkSettings
    model: LanguageModel
    embedder: EmbeddingModel | None
    progress: Progress
    meter: CpuMeter
    share: Callable[[], SharedOutputs | None] | None = None


class ChunkEngine(Protocol):
    """Works chunks and yields their results in the order of ``tasks`` (the driver
    writes them in that order, so every engine gives the same outputs). ``tasks`` is
    consumed lazily: an engine keeps only a bounded number of chunks in flight."""

    name: str
    in_process: bool  # chunks worked by the driver's own process (its meter counts them)

    def run_chunks(
        self, run: ChunkRun, tasks: Iterator[ChunkTask]
    ) -> AsyncGenerator[ChunkResult, None]: ...

    def describe(self) -> dict[str, Any]:
        """``workers`` and anything else the result's ``engine`` object shows."""
        ...

    async def embed(self, run: ChunkRun, texts: Sequence[str]) -> Vectors:
        """Vectors of ``texts`` by the run's embedder, wherever it runs best."""
        ...

    async def close(self) -> None:
        """The run is over: end what the engine started for it (the engine can serve
        another run afterwards)."""
        ...


class EngineEmbedder:
    """The run's embedder as its engine runs it (for the driver's own phases)."""

    def __init__(self, engine: ChunkEngine, run: ChunkRun, name: str) -> None:
        self.engine = engine
        self.run = run
        self.name = name

    async def embed(self, texts: Sequence[str]) -> Vectors:
        return await self.engine.embed(self.run, texts)


def recipe_for(embedder: EmbeddingModel | None) -> Recipe | None:
    """How a worker builds the provider under the driver's embedder stack, if it can
    (:class:`~relmerge.providers.embedding.Rebuildable`)."""
    base = innermost(embedder) if embedder is not None else None
    return base.worker_recipe() if isinstance(base, Rebuildable) else None


def collect(result: ChunkResult, run: ChunkRun) -> ChunkResult:
    """What a chunk worked elsewhere brings back, applied in the driver: the answers its
    model found unusable go to the run's accounting, its progress is replayed, and the
    vectors it computed go into the run cache. A chunk worked in this process brings
    nothing back (it used the driver's own model, progress and embedder)."""
    if result.invalid_answers and isinstance(run.model, InvalidAnswerCounter):
        for _ in range(result.invalid_answers):
            run.model.note_invalid()
    if result.progress is not None:
        result.progress.replay(run.progress)
        result.progress = None
    if result.new_vectors:
        persistent = persistent_layer(run.embedder)
        if persistent is not None:
            with run.meter.stage("cache"):
                persistent.store(result.new_vectors)
        result.new_vectors = []
    return result


async def embed_driver_texts(
    run: ChunkRun,
    texts: Sequence[str],
    start: Callable[[], Awaitable[int]],
    embed_parts: Callable[[list[list[str]]], Awaitable[list[Vectors]]],
) -> Vectors:
    """The driver's own texts (the report's entity names), embedded where the engine's
    workers embed: those the run cache serves from it, the rest by the workers and
    stored, so the driver never loads the model. ``start()`` readies the workers and
    says how many there are; ``embed_parts`` embeds parts of whole 1024s (the model's
    batches fall where a one-process run's fall), in order. An embedder the workers
    cannot build embeds in the driver."""
    if recipe_for(run.embedder) is None or not texts:
        if run.embedder is None:
            raise AssertionError("no embedder")  # the pipeline asks only with one
        return await run.embedder.embed(texts)
    workers = await start()

    async def on_workers(batch: list[str]) -> Vectors:
        size = 1024 * max(1, -(-len(batch) // (4 * workers * 1024)))
        parts = [batch[i : i + size] for i in range(0, len(batch), size)]
        return np.concatenate(await embed_parts(parts))

    persistent = persistent_layer(run.embedder)
    if persistent is None:
        return await on_workers(list(texts))
    return await persistent.embed_with(texts, on_workers)
