"""``--engine ray``: chunks worked by Ray tasks; the driver streams, serves and writes.

Each chunk of whole blocks goes to a task that runs all of its work
(``relmerge.chunk.work_chunk``: exact stage, embedding, scores, decisions) and returns
only what the driver writes. The driver reads the input, plans the chunks, keeps at most
``window`` of them in flight (a few per cluster CPU, so a large input never sits in Ray's
object store at once), writes the results in plan order (the outputs of a local run),
and serves two actors: the LLM gateway (every request through the run's model: one
concurrency limit, budget, cache and count, see ``gateway``) and the embedding desk.

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
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from relmerge.chunk import (
    ChunkResult,
    ChunkRun,
    ChunkSettings,
    ChunkTask,
    RecordedProgress,
    work_chunk,
)
from relmerge.cputime import CpuMeter
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
from relmerge.providers.cached import PersistentEmbedder
from relmerge.providers.embedding import EmbeddingModel, HashEmbedder, Vectors

NO_RAY = "--engine ray needs Ray, which is not installed: pip install relmerge[ray]"


def import_ray() -> ModuleType:
    try:
        import ray
    except ImportError as error:
        raise ConfigError(NO_RAY) from error
    return ray


def _chain(component: Any) -> Iterator[Any]:
    """A wrapper and what it wraps (``inner``), outermost first."""
    while component is not None:
        yield component
        component = getattr(component, "inner", None)


@dataclass(frozen=True)
class EmbedderRecipe:
    """How a worker builds the driver's embedder: ``use`` (the default, one process per
    task: Ray runs a task per CPU) or ``hash`` of ``dim`` dimensions."""

    provider: str
    dim: int = 512

    def build(self) -> EmbeddingModel:
        if self.provider == "hash":
            return HashEmbedder(self.dim)
        from relmerge.providers.use_embed import UseEmbedder

        return UseEmbedder(processes=1)


def recipe_for(embedder: EmbeddingModel | None) -> EmbedderRecipe | None:
    """The recipe of the embedder under the driver's wrappers, if a worker can build it."""
    base = list(_chain(embedder))[-1] if embedder is not None else None
    if isinstance(base, HashEmbedder):
        return EmbedderRecipe("hash", base.dim)
    try:
        from relmerge.providers.use_embed import UseEmbedder
    except ImportError:  # pragma: no cover - a core dependency
        return None
    return EmbedderRecipe("use") if isinstance(base, UseEmbedder) else None


def persistent_layer(embedder: EmbeddingModel | None) -> PersistentEmbedder | None:
    return next((c for c in _chain(embedder) if isinstance(c, PersistentEmbedder)), None)


# One embedder per worker process, built on its first task and kept for the later ones:
# loading the default model takes about a second.
_WORKER_EMBEDDERS: dict[EmbedderRecipe, EmbeddingModel] = {}


def worker_base(recipe: EmbedderRecipe) -> EmbeddingModel:
    """The process's embedder. No cache of recent texts in front of it: a chunk's texts
    are embedded as one list, batched as a local run batches them (see ``pipeline``)."""
    if recipe not in _WORKER_EMBEDDERS:
        _WORKER_EMBEDDERS[recipe] = recipe.build()
    return _WORKER_EMBEDDERS[recipe]


class WorkerEmbedder:
    """A worker's embedder: vectors the driver's cache holds (asked through the desk),
    the rest embedded here (``base``) and kept in ``new`` for the driver's cache; or,
    without a ``base``, every text embedded by the driver through the desk."""

    def __init__(self, base: EmbeddingModel | None, desk: Any, name: str) -> None:
        self.base = base
        self.desk = desk
        self.name = name
        self.new: list[tuple[str, bytes]] = []

    async def _ask(self, kind: str, texts: list[str]) -> Any:
        outcome: Outcome = await self.desk.ask.remote((kind, texts))
        raise_failure(outcome)
        return outcome[1]

    async def embed(self, texts: Sequence[str]) -> Vectors:
        texts = list(texts)
        if self.base is None:
            vectors: Vectors = await self._ask("embed", texts)
            return vectors
        known: dict[int, bytes] = await self._ask("vectors", texts) if self.desk else {}
        missing = [i for i in range(len(texts)) if i not in known]
        computed = await self.base.embed([texts[i] for i in missing]) if missing else None
        if self.desk is not None and computed is not None:
            self.new.extend((texts[i], computed[n].tobytes()) for n, i in enumerate(missing))
        if not known and computed is not None:
            return computed
        dim = computed.shape[1] if computed is not None else len(next(iter(known.values()))) // 4
        matrix: Vectors = np.empty((len(texts), dim), dtype=np.float32)
        for i, data in known.items():
            matrix[i] = np.frombuffer(data, dtype=np.float32)
        if computed is not None:
            matrix[missing] = computed
        return matrix


class DeskModel:
    """The driver's side of the desk, served like a model by ``GatewayServer``: a
    request is ("vectors", texts) → {position: bytes} or ("embed", texts) → vectors."""

    name = "embedding desk"
    available = True

    def __init__(self, embedder: EmbeddingModel | None, persistent: PersistentEmbedder | None):
        self.embedder = embedder
        self.persistent = persistent

    async def invoke(self, request: Any) -> Any:
        kind, texts = request
        if kind == "vectors":
            return self.persistent.stored(texts) if self.persistent is not None else {}
        if self.embedder is None:
            raise ProviderError("no embedding model is configured", retryable=False)
        return await self.embedder.embed(texts)


def _work_on_worker(
    settings: ChunkSettings,
    task: ChunkTask,
    gateway: Any,
    desk: Any,
    llm_name: str,
    llm_available: bool,
    recipe: EmbedderRecipe | None,
) -> tuple[Outcome, ChunkResult | None]:
    """A Ray task: one chunk, its CPU measured in this process."""
    import ray

    meter = CpuMeter()
    model = GatewayModel(gateway, llm_name, llm_available)
    embedder = None
    if settings.semantic:
        base = worker_base(recipe) if recipe is not None else None
        embedder = WorkerEmbedder(base, desk, base.name if base is not None else "driver")
    progress = RecordedProgress()
    try:
        result = asyncio.run(work_chunk(task, settings, model, embedder, progress, meter))
    except ProviderError as error:  # an endpoint that cannot work: the run stops, as locally
        return provider_failure(error), None
    result.invalid_answers = model.invalid_answers
    result.progress = progress
    result.node = ray.get_runtime_context().get_node_id()
    if embedder is not None:
        result.new_vectors = embedder.new
    return ("ok", None), result


def _embed_on_worker(recipe: EmbedderRecipe, texts: list[str]) -> tuple[Vectors, float]:
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

    async def embed(self, run: ChunkRun, texts: Sequence[str]) -> Vectors:
        """Texts of the driver's own phases (the report's entity names) on the workers, in
        parts: the driver never loads the model; an embedder that cannot be built there
        embeds in the driver."""
        recipe = recipe_for(run.embedder)
        if recipe is None or not texts:
            if run.embedder is None:
                raise AssertionError("no embedder")  # the pipeline asks only with one
            return await run.embedder.embed(texts)
        with run.meter.stage("connect"):
            ray = self.connect()
        task = ray.remote(num_cpus=1, max_retries=0, scheduling_strategy=self.strategy)(
            _embed_on_worker
        )
        self._cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        # Parts of whole 1024s: the model's batches fall where a local run's fall.
        size = 1024 * max(1, -(-len(texts) // (4 * self._cpus * 1024)))
        refs = [task.remote(recipe, list(texts[i : i + size])) for i in range(0, len(texts), size)]
        parts = []
        for ref in refs:
            vectors, cpu = await landed(ref)
            self.extra_worker_cpu["plan"] = self.extra_worker_cpu.get("plan", 0.0) + cpu
            parts.append(vectors)
        return np.concatenate(parts)

    async def run_chunks(
        self, run: ChunkRun, tasks: Iterator[ChunkTask]
    ) -> AsyncGenerator[ChunkResult, None]:
        with run.meter.stage("connect"):
            ray = self.connect()
        self._cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        window = self.window or 2 * self._cpus
        recipe = recipe_for(run.embedder) if run.settings.semantic else None
        persistent = persistent_layer(run.embedder)
        servers: list[tuple[Any, GatewayServer, asyncio.Task[None]]] = []

        def serve(model: Any, concurrency: int) -> Any:
            actor = ray.remote(num_cpus=0, max_concurrency=10_000)(LLMGateway).remote()
            server = GatewayServer(actor, model, concurrency)
            servers.append((actor, server, asyncio.create_task(server.serve())))
            return actor

        gateway = serve(run.model, run.settings.config.concurrency) if run.model.available else None
        desk = None
        if run.settings.semantic and (recipe is None or persistent is not None):
            desk = serve(DeskModel(run.embedder, persistent), 4)
        work = ray.remote(num_cpus=1, max_retries=0, scheduling_strategy=self.strategy)(
            _work_on_worker
        )
        settings = ray.put(run.settings)
        llm = (run.model.name, run.model.available)
        note_invalid = getattr(run.model, "note_invalid", None)
        in_flight: deque[Any] = deque()
        try:
            while True:
                with run.meter.stage("submit"):  # read from the spool, sent to the store
                    task = next(tasks, None)
                    if task is not None:
                        in_flight.append(work.remote(settings, task, gateway, desk, *llm, recipe))
                if task is None:
                    break
                if len(in_flight) < window:
                    continue
                yield await self._collect(in_flight.popleft(), run, persistent, note_invalid)
            while in_flight:
                yield await self._collect(in_flight.popleft(), run, persistent, note_invalid)
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

    async def _collect(
        self,
        ref: Any,
        run: ChunkRun,
        persistent: PersistentEmbedder | None,
        note_invalid: Any,
    ) -> ChunkResult:
        landing = landed(ref)
        await asyncio.wait([landing])
        with run.meter.stage("collect"):  # the result unpickled here
            outcome, landed_result = landing.result()
        raise_failure(outcome)
        result: ChunkResult = landed_result
        if note_invalid is not None:
            for _ in range(result.invalid_answers):
                note_invalid()
        if persistent is not None and result.new_vectors:
            with run.meter.stage("cache"):
                persistent.store(result.new_vectors)
            result.new_vectors = []
        if result.progress is not None:
            result.progress.replay(run.progress)
            result.progress = None
        return result
