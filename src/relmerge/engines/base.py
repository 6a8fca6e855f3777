"""Where a chunk's blocks are decided: the engine protocol and the in-process engine.

What a block's decision is belongs to the kernel (``relmerge.decide.job``); an engine
only chooses where ``decide_block`` runs and hands results back in block order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol

from relmerge.decide.block import BlockDecider, BlockResult
from relmerge.decide.job import BlockJob, decide_block


class BlockEngine(Protocol):
    """Decides the blocks; results are in the order of ``jobs``, whatever order they end."""

    async def decide_blocks(
        self,
        decider: BlockDecider,
        jobs: Sequence[BlockJob],
        on_done: Callable[[int], None],
    ) -> list[BlockResult]: ...


class LocalEngine:
    """The blocks of a chunk in this process, concurrently on one event loop (the default;
    ``engines.local.LocalEngine`` adds the chunks)."""

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
