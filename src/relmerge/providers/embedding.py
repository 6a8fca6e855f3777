"""The embedding protocol (DESIGN §4): ``async embed(texts) -> vectors``.

Vectors are float32 rows, L2-normalised, so a dot product is a cosine. ``CachedEmbedder``
embeds each distinct text once per run, whatever the provider.

A provider that embeds a large call in pieces says how many texts each finished piece
held (:func:`report_embedded`, from any thread), so that a caller listening
(:func:`embedded_to`) can show progress inside one call: a call of thousands of texts
takes many seconds. Providers that do not say anything are fine: the caller counts the
whole call when it returns.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from relmerge.normalize import normalize_key_text
from relmerge.wrapping import layers

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class EmbeddingModel(Protocol):
    name: str

    async def embed(self, texts: Sequence[str]) -> Vectors: ...


@dataclass(frozen=True)
class Recipe:
    """How another process builds an embedder equal to one of this process: a factory
    named ``module:attribute`` (as an entry point names one) and its keyword arguments.
    A plain value: it is pickled to worker processes and Ray tasks."""

    factory: str
    options: tuple[tuple[str, Any], ...] = ()

    def build(self) -> EmbeddingModel:
        built: EmbeddingModel = EntryPoint("recipe", self.factory, "").load()(**dict(self.options))
        return built


@runtime_checkable
class Rebuildable(Protocol):
    """An embedder a worker process can build for itself (the default model, loaded once
    per worker; the hash embedder): the engines' workers then embed their chunks' texts
    themselves. Any other embedder embeds for them in the driver."""

    def worker_recipe(self) -> Recipe: ...


@runtime_checkable
class TwoStage(Protocol):
    """An embedder with a cheap first stage: vectors good enough where they cannot change
    a decision (the semantic stage asks the full model only where a rule reads a cosine;
    ``relmerge.stages.semantic.two_stage``)."""

    def first_stage(self) -> EmbeddingModel | None: ...


def has_first_stage(embedder: object) -> bool:
    """Whether the provider under ``embedder``'s wrappers has a first stage (nothing is
    loaded to find out)."""
    return any(isinstance(layer, TwoStage) for layer in layers(embedder))


def first_stage_of(embedder: object) -> EmbeddingModel | None:
    """The first stage of the provider under ``embedder``'s wrappers, if it has one."""
    for layer in layers(embedder):
        if isinstance(layer, TwoStage):
            return layer.first_stage()
    return None


_ON_EMBEDDED: ContextVar[Callable[[int], None] | None] = ContextVar(
    "relmerge_on_embedded", default=None
)


@contextmanager
def embedded_to(callback: Callable[[int], None]) -> Iterator[None]:
    """Embedding calls made inside the block (and the threads they start with
    ``asyncio.to_thread``) report finished pieces to ``callback``, which must be safe to
    call from any thread."""
    token = _ON_EMBEDDED.set(callback)
    try:
        yield
    finally:
        _ON_EMBEDDED.reset(token)


def embedded_callback() -> Callable[[int], None] | None:
    """Where this context reports finished pieces (for a thread the provider starts
    itself, which does not inherit the context)."""
    return _ON_EMBEDDED.get()


def report_embedded(count: int, callback: Callable[[int], None] | None = None) -> None:
    """``count`` more texts of the current call are embedded (to ``callback``, else to
    whoever listens in this context)."""
    callback = callback or _ON_EMBEDDED.get()
    if callback is not None and count:
        callback(count)


def l2_normalise(vectors: npt.NDArray[np.floating]) -> Vectors:
    """Rows scaled to length 1. A float32 matrix is scaled in place (callers pass a fresh
    one): a copy of every vector of a large batch is memory the run does not have."""
    matrix: Vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    matrix /= norms
    return matrix


class CachedEmbedder:
    """Wraps an embedder so that a text seen recently is not embedded again.

    Keeps the vectors of the last ``max_texts`` distinct texts (least recently used go
    first): a run decides its blocks a chunk at a time and each chunk embeds its distinct
    texts once, so the cache only has to bridge chunks (relation names, entity names);
    holding every vector of a million-record batch here was most of the run's memory.
    """

    def __init__(self, inner: EmbeddingModel, max_texts: int = 100_000) -> None:
        self.inner = inner
        self.name = inner.name
        self.max_texts = max_texts
        self._cache: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
        self.embedded_texts = 0

    async def embed(self, texts: Sequence[str]) -> Vectors:
        # Take the known vectors now: another call may evict them while this one waits.
        known = {t: self._cache[t] for t in texts if t in self._cache}
        for text in known:
            self._cache.move_to_end(text)
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        if missing:
            vectors = await self.inner.embed(missing)
            self.embedded_texts += len(missing)
            self._remember(missing, list(vectors))
            if len(missing) == len(texts):  # all new and distinct: no second copy
                return vectors
            known.update(zip(missing, vectors, strict=True))
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([known[t] for t in texts])

    def _remember(self, texts: Sequence[str], vectors: Sequence[npt.NDArray[np.float32]]) -> None:
        """Keep copies of the rows (a view would keep the whole batch's matrix alive)."""
        start = max(0, len(texts) - self.max_texts)
        for text, vector in zip(texts[start:], vectors[start:], strict=True):
            self._cache[text] = np.array(vector, dtype=np.float32)
        while len(self._cache) > self.max_texts:
            self._cache.popitem(last=False)


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


class HashEmbedder:
    """Model-free lexical vectors: hashed character n-grams (2- and 3-grams, CJK 1- and
    2-grams). Tiny and instant; only lexical overlap, so no cross-language matches."""

    name = "hash"

    def __init__(self, dim: int = 512) -> None:
        self.dim = dim
        self.cache_identity = f"hash:{dim}"

    def worker_recipe(self) -> Recipe:
        return Recipe("relmerge.providers.embedding:HashEmbedder", (("dim", self.dim),))

    def _grams(self, text: str) -> list[str]:
        text = f" {normalize_key_text(text)} "
        grams = [text[i : i + n] for n in (2, 3) for i in range(len(text) - n + 1)]
        grams += [ch for ch in text if _CJK.match(ch)]
        return grams

    async def embed(self, texts: Sequence[str]) -> Vectors:
        matrix = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for gram in self._grams(text):
                digest = hashlib.blake2b(gram.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                sign = 1.0 if value & 1 else -1.0
                matrix[row, (value >> 1) % self.dim] += sign
        return l2_normalise(matrix)
