"""Where work runs: the in-process engine, for a run's chunks and a chunk's blocks.

What a block's decision is belongs to the kernel (``relmerge.decide.job``), what a
chunk's work is to ``relmerge.chunk``; an engine only chooses where they run and hands
results back in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from relmerge.decide.block import BlockDecider, BlockResult
from relmerge.decide.job import BlockJob, decide_block

if TYPE_CHECKING:
    from relmerge.chunk import ChunkResult, ChunkRun, ChunkTask
    from relmerge.providers.embedding import Vectors


class BlockEngine(Protocol):
    """Decides the blocks; results are in the order of ``jobs``, whatever order they end."""

    async def decide_blocks(
        self,
        decider: BlockDecider,
        jobs: Sequence[BlockJob],
        on_done: Callable[[int], None],
    ) -> list[BlockResult]: ...


class LocalEngine:
    """Everything in this process (the default): chunks one after the other, the blocks
    of a chunk concurrently on one event loop."""

    name = "local"

    async def run_chunks(
        self, run: ChunkRun, tasks: Iterator[ChunkTask]
    ) -> AsyncGenerator[ChunkResult, None]:
        # One chunk at a time: preparing the next one while this one was decided
        # measured slower on two cores (the embedding already uses both).
        from relmerge.chunk import work_chunk

        for task in tasks:
            yield await work_chunk(
                task, run.settings, run.model, run.embedder, run.on_progress, run.meter
            )

    def describe(self) -> dict[str, Any]:
        return {"workers": 0}

    async def embed(self, run: ChunkRun, texts: Sequence[str]) -> Vectors:
        if run.embedder is None:
            raise AssertionError("no embedder")  # the pipeline asks only with one
        return await run.embedder.embed(texts)

    async def decide_blocks(
        self,
        decider: BlockDecider,
        jobs: Sequence[BlockJob],
        on_done: Callable[[int], None],
    ) -> list[BlockResult]:
        async def one(index: int) -> BlockResult:
            # The job is built when its block starts (``jobs`` may be lazy): blocks that
            # never wait for an LLM are decided one after the other, and only the block
            # being decided holds its vectors.
            result = await decide_block(jobs[index], decider)
            on_done(1)
            return result

        return list(await asyncio.gather(*(one(index) for index in range(len(jobs)))))
