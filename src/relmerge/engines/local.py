"""The local engine: a run's chunks in this process, one after the other; and which
engine a run gets when its caller names none (:func:`default_engine`).

Each chunk is worked by ``relmerge.stages.chunk.work_chunk`` with the driver's model and
embedder; its blocks are decided concurrently on this event loop by the semantic stage.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Iterator, Sequence
from typing import Any

from relmerge.engines.base import ChunkEngine, ChunkRun, collect, recipe_for
from relmerge.providers.embedding import EmbeddingModel, Vectors
from relmerge.stages.chunk import ChunkResult, ChunkTask, work_chunk


def default_engine(chunks: int, embedder: EmbeddingModel | None) -> ChunkEngine:
    """Worker processes, one per CPU (at most one per chunk), when the batch has several
    chunks and the semantic stage embeds with a model a worker can load itself (the
    default one, or hash): then the embedding, exact stage and decisions of two chunks
    run side by side while this process reads and writes. Otherwise this process."""
    workers = min(os.cpu_count() or 1, chunks)
    if workers >= 2 and embedder is not None and recipe_for(embedder) is not None:
        # Imported here: the worker module (``python -m relmerge.engines.process_worker``)
        # must not be imported by ``import relmerge`` before it runs as __main__.
        from relmerge.engines.processes import ProcessEngine

        return ProcessEngine(workers)
    return LocalEngine()


class LocalEngine:
    """Everything in this process: chunks one after the other, the blocks of a chunk
    concurrently on one event loop."""

    name = "local"
    in_process = True

    async def run_chunks(
        self, run: ChunkRun, tasks: Iterator[ChunkTask]
    ) -> AsyncGenerator[ChunkResult, None]:
        # One chunk at a time: preparing the next one while this one was decided
        # measured slower on two cores (the embedding already uses both).
        for task in tasks:
            result = await work_chunk(
                task, run.settings, run.model, run.embedder, run.progress, run.meter
            )
            yield collect(result, run)

    def describe(self) -> dict[str, Any]:
        return {"workers": 0}

    async def close(self) -> None:
        """Nothing was started."""

    async def embed(self, run: ChunkRun, texts: Sequence[str]) -> Vectors:
        if run.embedder is None:
            raise AssertionError("no embedder")  # the pipeline asks only with one
        return await run.embedder.embed(texts)
