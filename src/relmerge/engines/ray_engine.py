"""``--engine ray``: chunks worked by Ray tasks; the driver streams, serves and keeps the books.

Each chunk of whole blocks goes to a task that runs all of its work
(``relmerge.stages.chunk.work_chunk``: exact stage, embedding, scores, decisions) and
writes its relation files into the run's output directory where it sees that directory
(``outputs``: the same bytes, keys and final ids as the driver's; a chunk the canaries
may have worked again, or a run into any other store, is written by the driver). The
driver reads the input, plans the chunks, keeps at most ``window`` of them in flight (a
few per cluster CPU, so a large input never sits in Ray's object store at once), takes
the results in plan order (the id mapping, logs and counts of a local run), and serves
two actors: the LLM gateway (every request through the run's model: one concurrency
limit, budget, cache and count, see ``gateway``) and the embedding desk.

The desk answers a worker's "which of these vectors does your cache hold" (a worker
never opens the driver's SQLite file; the vectors it computes come back with its result
and the driver stores them) and, for an embedder that cannot be rebuilt on a worker (an
OpenAI-compatible endpoint, an object of the caller's), embeds for it. The default
embedder is rebuilt once per worker process and kept for that process's later tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncGenerator, Iterator, Sequence
from types import ModuleType
from typing import Any

from relmerge.cputime import CpuMeter
from relmerge.engines.base import ChunkRun, collect, embed_driver_texts, recipe_for
from relmerge.engines.gateway import (
    GatewayServer,
    LLMGateway,
    Outcome,
    RayDoor,
    landed,
    raise_failure,
)
from relmerge.engines.outputs import SharedOutputs
from relmerge.engines.workers import (
    DeskModel,
    WorkerSetup,
    work_on_worker,
    worker_base,
    worker_setup,
    write_where_worked,
)
from relmerge.errors import ConfigError
from relmerge.providers.cached import persistent_layer
from relmerge.providers.embedding import Recipe, Vectors
from relmerge.stages.chunk import ChunkResult, ChunkTask, RecordedProgress

NO_RAY = "--engine ray needs Ray, which is not installed: pip install relmerge[ray]"


def import_ray() -> ModuleType:
    try:
        import ray
    except ImportError as error:
        raise ConfigError(NO_RAY) from error
    return ray


def _work_on_worker(
    setup: WorkerSetup, task: ChunkTask, gateway: Any, desk: Any, outputs: SharedOutputs | None
) -> tuple[Outcome, ChunkResult | None]:
    """A Ray task: one chunk (see ``workers.work_on_worker``), and the node it ran on; its
    relation files written here where the run's ``outputs`` can be (see
    ``workers.write_where_worked``)."""
    import ray

    llm = RayDoor(gateway) if gateway is not None else None
    door = RayDoor(desk) if desk is not None else None
    progress = RecordedProgress()

    async def work() -> tuple[Outcome, ChunkResult | None]:
        outcome, result = await work_on_worker(task, setup, llm, door, progress)
        if result is not None and outputs is not None:
            failed = await write_where_worked(setup, task, result, outputs)
            if failed is not None:
                return failed, None
        return outcome, result

    outcome, result = asyncio.run(work())
    if result is not None:
        result.progress = progress
        result.node = ray.get_runtime_context().get_node_id()
    return outcome, result


def _embed_on_worker(recipe: Recipe, texts: list[str]) -> tuple[Vectors, float]:
    """A Ray task: vectors of ``texts`` and the CPU seconds they took here."""
    meter = CpuMeter()
    with meter.stage("embed"):
        vectors = asyncio.run(worker_base(recipe).embed(texts))
    return vectors, meter.total()


class RayEngine:
    """Works chunks on a Ray cluster: ``address`` as for ``ray.init`` (None: the
    ``RAY_ADDRESS`` cluster if set, else a new local one with this machine's CPUs).
    An already initialised Ray (``ray.init`` by the caller) is used as it is.

    ``window``: chunks in flight at once (default: two per cluster CPU). Tasks are
    spread over the nodes (Ray's SPREAD strategy) and take one CPU each.
    """

    name = "ray"
    in_process = False

    def __init__(
        self, address: str | None = None, window: int | None = None, strategy: str = "SPREAD"
    ) -> None:
        self.address = address
        self.window = window
        self.strategy = strategy
        self._cpus = 0
        self.extra_worker_cpu: dict[str, float] = {}  # worker CPU outside chunk results

    def connect(self) -> ModuleType:
        ray = import_ray()
        if not ray.is_initialized():
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False)
        return ray

    def describe(self) -> dict[str, Any]:
        return {"workers": self._cpus, "extra_worker_cpu": dict(self.extra_worker_cpu)}

    async def close(self) -> None:
        """The actors end with each run; a Ray this engine joined is left to its owner."""

    async def embed(self, run: ChunkRun, texts: Sequence[str]) -> Vectors:
        """Texts of the driver's own phases (the report's entity names), on the workers
        (see ``base.embed_driver_texts``)."""
        ray: ModuleType | None = None

        async def start() -> int:
            nonlocal ray
            with run.meter.stage("connect"):
                ray = self.connect()
            self._cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
            return self._cpus

        async def embed_parts(parts: list[list[str]]) -> list[Vectors]:
            assert ray is not None  # started first
            recipe = recipe_for(run.embedder)
            task = ray.remote(num_cpus=1, max_retries=0, scheduling_strategy=self.strategy)(
                _embed_on_worker
            )
            refs = [task.remote(recipe, part) for part in parts]
            vectors = []
            for ref in refs:
                part_vectors, cpu = await landed(ref)
                self.extra_worker_cpu["plan"] = self.extra_worker_cpu.get("plan", 0.0) + cpu
                vectors.append(part_vectors)
            return vectors

        return await embed_driver_texts(run, texts, start, embed_parts)

    async def run_chunks(
        self, run: ChunkRun, tasks: Iterator[ChunkTask]
    ) -> AsyncGenerator[ChunkResult, None]:
        with run.meter.stage("connect"):
            ray = self.connect()
        self._cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        window = self.window or 2 * self._cpus
        setup = worker_setup(run)
        servers: list[tuple[Any, GatewayServer, asyncio.Task[None]]] = []

        def serve(model: Any, concurrency: int) -> Any:
            actor = ray.remote(num_cpus=0, max_concurrency=10_000)(LLMGateway).remote()
            server = GatewayServer(actor, model, concurrency)
            servers.append((actor, server, asyncio.create_task(server.serve())))
            return actor

        gateway = serve(run.model, run.settings.config.concurrency) if run.model.available else None
        desk = None
        if setup.desk:
            desk = serve(DeskModel(run.embedder, persistent_layer(run.embedder)), 4)
        work = ray.remote(num_cpus=1, max_retries=0, scheduling_strategy=self.strategy)(
            _work_on_worker
        )
        shared = ray.put(setup)
        with run.meter.stage("write"):  # where the workers write the relation files
            outputs = ray.put(run.share() if run.share is not None else None)
        in_flight: deque[Any] = deque()
        try:
            while True:
                with run.meter.stage("submit"):  # read from the spool, sent to the store
                    task = next(tasks, None)
                    if task is not None:
                        in_flight.append(work.remote(shared, task, gateway, desk, outputs))
                if task is None:
                    break
                if len(in_flight) < window:
                    continue
                yield await self._collect(in_flight.popleft(), run)
            while in_flight:
                yield await self._collect(in_flight.popleft(), run)
        finally:
            for ref in in_flight:  # a failed or abandoned run: stop what is still running
                ray.cancel(ref, force=True)
            for actor, server, serving in servers:
                await server.stop()
                with contextlib.suppress(asyncio.CancelledError):
                    await serving
                ray.kill(actor)
        for _, server, _ in servers:
            if server.errors:
                raise server.errors[0]

    async def _collect(self, ref: Any, run: ChunkRun) -> ChunkResult:
        landing = landed(ref)
        await asyncio.wait([landing])
        with run.meter.stage("collect"):  # the result unpickled here
            outcome, landed_result = landing.result()
        raise_failure(outcome)
        result: ChunkResult = landed_result
        return collect(result, run)
