"""What a chunk worker runs with, whatever carries its messages (Ray, a local pipe).

A worker rebuilds the driver's embedder from a recipe (the default model, loaded once per
worker process, or the hash embedder); vectors the driver's cache holds are asked for
through the embedding desk (a :class:`~relmerge.engines.gateway.Door` to
:class:`DeskModel` in the driver), and the vectors the worker computes go back with its
result for that cache. A worker never opens the driver's SQLite file.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from relmerge.engines.gateway import Door, raise_failure
from relmerge.errors import ProviderError
from relmerge.providers.cached import PersistentEmbedder
from relmerge.providers.embedding import EmbeddingModel, HashEmbedder, Vectors


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

    def __init__(self, base: EmbeddingModel | None, desk: Door | None, name: str) -> None:
        self.base = base
        self.desk = desk
        self.name = name
        self.new: list[tuple[str, bytes]] = []

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
