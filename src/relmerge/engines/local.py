"""The default engine: a run's chunks in this process, one after the other.

Each chunk is worked by ``relmerge.chunk.work_chunk`` with the driver's model and
embedder; its blocks are decided concurrently on this event loop (``base.LocalEngine``).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator, Sequence
from typing import Any

from relmerge.chunk import ChunkResult, ChunkRun, ChunkTask, work_chunk
from relmerge.engines import base
from relmerge.providers.embedding import Vectors


class LocalEngine(base.LocalEngine):
    """Everything in this process: chunks one after the other, the blocks of a chunk
    concurrently on one event loop."""

    name = "local"

    async def run_chunks(
        self, run: ChunkRun, tasks: Iterator[ChunkTask]
    ) -> AsyncGenerator[ChunkResult, None]:
        # One chunk at a time: preparing the next one while this one was decided
        # measured slower on two cores (the embedding already uses both).
        for task in tasks:
            yield await work_chunk(
                task, run.settings, run.model, run.embedder, run.progress, run.meter
            )

    def describe(self) -> dict[str, Any]:
        return {"workers": 0}

    async def embed(self, run: ChunkRun, texts: Sequence[str]) -> Vectors:
        if run.embedder is None:
            raise AssertionError("no embedder")  # the pipeline asks only with one
        return await run.embedder.embed(texts)
