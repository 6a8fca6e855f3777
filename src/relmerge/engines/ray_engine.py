"""``--engine ray``: blocks decided by Ray tasks, LLM requests through one gateway.

Blocks are shipped in chunks (a few per CPU, balanced by pair count) to tasks that decide
them through the kernel (``relmerge.decide.job.decide_block``, as a local run does); each
chunk carries only the input relations its units stand for, renumbered in input order so
member ids come out the same. The
results come back in block order, so the driver merges them exactly as a local run does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import ModuleType
from typing import Any

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.block import BlockDecider, BlockResult
from relmerge.decide.job import BlockJob, decide_block
from relmerge.decide.memory import Remembered
from relmerge.engines.gateway import (
    GatewayModel,
    GatewayServer,
    LLMGateway,
    Outcome,
    landed,
    provider_failure,
    raise_failure,
)
from relmerge.errors import ConfigError, ProviderError
from relmerge.model import ExtractedRelation
from relmerge.units import Originals, Unit

NO_RAY = "--engine ray needs Ray, which is not installed: pip install relmerge[ray]"


def import_ray() -> ModuleType:
    try:
        import ray
    except ImportError as error:
        raise ConfigError(NO_RAY) from error
    return ray


def chunk_jobs(jobs: Sequence[BlockJob], parts: int) -> list[list[int]]:
    """Contiguous runs of job indices of about equal pair count, at most ``parts`` + 1."""
    total = sum(job.pair_count for job in jobs)
    target = max(1, -(-total // max(1, parts)))
    chunks: list[list[int]] = [[]]
    weight = 0
    for index, job in enumerate(jobs):
        if chunks[-1] and weight + job.pair_count > target:
            chunks.append([])
            weight = 0
        chunks[-1].append(index)
        weight += job.pair_count
    return chunks


def compact(
    jobs: Sequence[BlockJob], originals: Originals
) -> tuple[list[BlockJob], list[ExtractedRelation]]:
    """The jobs with members renumbered into the list of the relations they use.

    The renumbering keeps input order, so ``member_ids`` (sorted by index) is unchanged.
    """
    used = sorted({i for job in jobs for unit in job.units for i in unit.members})
    where = {index: position for position, index in enumerate(used)}
    renumbered = [
        replace(
            job,
            units=[
                Unit(unit.relation, tuple(where[i] for i in unit.members)) for unit in job.units
            ],
        )
        for job in jobs
    ]
    return renumbered, [originals[i] for i in used]


async def decide_chunk(
    config: DeduplicateRelationsConfig,
    memory: Remembered | None,
    originals: list[ExtractedRelation],
    jobs: list[BlockJob],
    gateway: Any,
    name: str,
) -> tuple[Outcome, list[BlockResult], int]:
    """A worker's chunk: (outcome, results in job order, answers found unusable)."""
    model = GatewayModel(gateway, name, gateway is not None)
    decider = BlockDecider(config, model, originals, asyncio.Semaphore(config.concurrency), memory)
    try:
        results = await asyncio.gather(*(decide_block(job, decider) for job in jobs))
    except ProviderError as error:  # an endpoint that cannot work: the run stops, as locally
        return provider_failure(error), [], model.invalid_answers
    return ("ok", None), list(results), model.invalid_answers


def _run_chunk(*args: Any) -> tuple[Outcome, list[BlockResult], int]:
    return asyncio.run(decide_chunk(*args))


class RayEngine:
    """Decides blocks on a Ray cluster: ``address`` as for ``ray.init`` (None: the
    ``RAY_ADDRESS`` cluster if set, else a new local one with this machine's CPUs).
    An already initialised Ray (``ray.init`` by the caller) is used as it is."""

    def __init__(self, address: str | None = None, chunks_per_cpu: int = 4) -> None:
        self.address = address
        self.chunks_per_cpu = chunks_per_cpu

    def connect(self) -> ModuleType:
        ray = import_ray()
        if not ray.is_initialized():
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False)
        return ray

    async def decide_blocks(
        self,
        decider: BlockDecider,
        jobs: Sequence[BlockJob],
        on_done: Callable[[int], None],
    ) -> list[BlockResult]:
        if not jobs:
            return []
        ray = self.connect()
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        chunks = chunk_jobs(jobs, cpus * self.chunks_per_cpu)
        gateway = None
        server = None
        if decider.llm.available:
            actor = ray.remote(num_cpus=0, max_concurrency=10_000)(LLMGateway)
            gateway = actor.remote()
            server = GatewayServer(gateway, decider.llm, decider.config.concurrency)
        task = ray.remote(num_cpus=1, max_retries=0)(_run_chunk)
        shared = ray.put(decider.config), ray.put(decider.memory)
        refs = []
        for chunk in chunks:
            chunk_jobs_, chunk_originals = compact([jobs[i] for i in chunk], decider.originals)
            refs.append(
                task.remote(*shared, chunk_originals, chunk_jobs_, gateway, decider.llm.name)
            )
        serving = asyncio.create_task(server.serve()) if server is not None else None
        try:
            results = await self._collect(refs, chunks, decider, on_done)
        except BaseException:
            for ref in refs:  # a no-op for the chunks already done
                ray.cancel(ref, force=True)
            raise
        finally:
            if server is not None and serving is not None:
                await server.stop()
                await serving
            if gateway is not None:
                ray.kill(gateway)
        if server is not None and server.errors:
            raise server.errors[0]
        return results

    async def _collect(
        self,
        refs: list[Any],
        chunks: list[list[int]],
        decider: BlockDecider,
        on_done: Callable[[int], None],
    ) -> list[BlockResult]:
        by_job: dict[int, BlockResult] = {}
        pending = {landed(ref): index for index, ref in enumerate(refs)}
        note_invalid = getattr(decider.llm, "note_invalid", None)
        while pending:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                chunk = chunks[pending.pop(future)]
                outcome, results, invalid = future.result()
                if note_invalid is not None:
                    for _ in range(invalid):
                        note_invalid()
                raise_failure(outcome)
                by_job.update(zip(chunk, results, strict=True))
                on_done(len(chunk))
        return [by_job[index] for index in range(len(by_job))]
