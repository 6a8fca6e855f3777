"""What a chunk worker runs with, whatever carries its messages (Ray, a local pipe).

The driver sends each worker one :class:`WorkerSetup` (:func:`worker_setup`); a worker
then works each chunk with :func:`work_on_worker`. Its language model is built by the
composition root (``providers.stack.build_model_stack``) over a
:class:`~relmerge.engines.gateway.GatewayModel`, whose requests go through a door to the
driver's model stack (one budget, cache, breaker and count for the run). Its embedder is
rebuilt from the driver's recipe (the default model, loaded once per worker process, or
the hash embedder); vectors the driver's cache holds are asked for through the embedding
desk (a :class:`~relmerge.engines.gateway.Door` to :class:`DeskModel` in the driver), and
the vectors the worker computes go back with its result for that cache. A worker never
opens the driver's SQLite file. A worker that sees the run's output directory writes its
chunk's relation files itself (:func:`write_where_worked`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from relmerge.cputime import CpuMeter
from relmerge.engines.base import ChunkRun, recipe_for
from relmerge.engines.gateway import Door, GatewayModel, Outcome, provider_failure, raise_failure
from relmerge.engines.outputs import SharedOutputs, encode_logs
from relmerge.errors import ProviderError, StoreError
from relmerge.progress import Progress
from relmerge.providers.cached import PersistentEmbedder, persistent_layer
from relmerge.providers.embedding import EmbeddingModel, Recipe, Vectors, first_stage_of
from relmerge.providers.stack import build_model_stack
from relmerge.stages.chunk import ChunkResult, ChunkSettings, ChunkTask, work_chunk


@dataclass(frozen=True)
class WorkerSetup:
    """What every chunk of the run shares, sent once to each worker."""

    settings: ChunkSettings
    recipe: Recipe | None  # None: every text embedded by the driver (the desk)
    llm_name: str
    llm_available: bool
    desk: bool  # the driver's cache (or embedder) answers through the desk


def worker_setup(run: ChunkRun) -> WorkerSetup:
    """The run's setup for its workers: the desk serves them where the driver's cache
    holds vectors, or where the driver's embedder cannot be rebuilt on a worker."""
    recipe = recipe_for(run.embedder) if run.settings.semantic else None
    desk = run.settings.semantic and (recipe is None or persistent_layer(run.embedder) is not None)
    return WorkerSetup(run.settings, recipe, run.model.name, run.model.available, desk)


# One embedder per worker process, built on its first task and kept for the later ones:
# loading the default model takes about a second.
_WORKER_EMBEDDERS: dict[Recipe, EmbeddingModel] = {}


def worker_base(recipe: Recipe) -> EmbeddingModel:
    """The process's embedder. No cache of recent texts in front of it: a chunk's texts
    are embedded as one list, batched as a local run batches them (see
    ``providers.stack.without_recent_texts``)."""
    if recipe not in _WORKER_EMBEDDERS:
        _WORKER_EMBEDDERS[recipe] = recipe.build()
    return _WORKER_EMBEDDERS[recipe]


async def work_on_worker(
    task: ChunkTask,
    setup: WorkerSetup,
    llm: Door | None,
    desk: Door | None,
    progress: Progress,
) -> tuple[Outcome, ChunkResult | None]:
    """One chunk on a worker, its CPU measured in this process: the LLM asked through
    ``llm`` (a door to the driver's model), cached vectors through ``desk``. An endpoint
    that cannot work is the outcome (the run stops, as locally); a bug is raised."""
    meter = CpuMeter()
    # The worker's stack counts the unusable answers it sees (for the driver's accounting)
    # and passes unanswered questions on to the driver's breaker; the run's limits, cache
    # and progress are the driver's stack, behind the door.
    gateway = GatewayModel(
        llm if setup.llm_available else None, setup.llm_name, setup.llm_available, task.number
    )
    model = build_model_stack(gateway, setup.settings.config, run_limits=False)
    embedder = None
    if setup.settings.semantic:
        base = worker_base(setup.recipe) if setup.recipe is not None else None
        to_desk = desk if setup.desk else None
        embedder = WorkerEmbedder(base, to_desk, base.name if base is not None else "driver")
    try:
        result = await work_chunk(task, setup.settings, model.model, embedder, progress, meter)
    except ProviderError as error:
        return provider_failure(error), None
    result.invalid_answers = model.stats.invalid_answers
    if embedder is not None:
        result.new_vectors = embedder.new
    return ("ok", None), result


async def write_where_worked(
    setup: WorkerSetup, task: ChunkTask, result: ChunkResult, outputs: SharedOutputs
) -> Outcome | None:
    """Write a worked chunk's relation files here, where this process sees the run's
    output directory (``outputs``), unless the chunk may be worked again without the model
    (it asked questions while the canaries judge the model: ``run.canaries``), whose
    result would replace this one. ``result`` then carries :class:`WrittenOutputs` and its
    log lines encoded; None, or a failure to write as the outcome ("store")."""
    judged = setup.llm_available and setup.settings.config.canaries > 0
    if (judged and result.llm_questions > 0) or not outputs.reachable():
        return None
    meter = CpuMeter()
    try:
        with meter.stage("write"):
            ids = {index: relation.relation_id for index, relation in task.originals().items()}
            result.outputs = await outputs.write(result.outputs, ids)
            encode_logs(result, ids)  # its logs' lines final too: bytes to the driver
    except StoreError as error:  # as the driver's writing would have failed
        return ("store", str(error))
    result.cpu["write"] = round(result.cpu.get("write", 0.0) + meter.total(), 4)
    return None


class WorkerEmbedder:
    """A worker's embedder: vectors the driver's cache holds (asked through the desk),
    the rest embedded here (``base``) and kept in ``new`` for the driver's cache; or,
    without a ``base``, every text embedded by the driver through the desk."""

    def __init__(self, base: EmbeddingModel | None, desk: Door | None, name: str) -> None:
        self.base = base
        self.desk = desk
        self.name = name
        self.new: list[tuple[str, bytes]] = []

    def first_stage(self) -> EmbeddingModel | None:
        """The worker's own embedder's cheap first stage (never cached: it is cheap)."""
        return first_stage_of(self.base) if self.base is not None else None

    async def _ask(self, kind: str, texts: list[str]) -> Any:
        if self.desk is None:
            raise ProviderError("no embedding model is configured", retryable=False)
        outcome = await self.desk.ask((kind, texts))
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
