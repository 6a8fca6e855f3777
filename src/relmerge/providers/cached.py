"""Cache wrappers: the same request never reaches a model twice, across runs.

``CachingModel`` replays an LLM answer for an identical request (same provider, endpoint,
model, response format, prompt and its version, task, messages, schema and temperature)
and marks it ``cached``; answers are stored whatever they say, so a re-run replays the
very same conversation, retries included, and ends with the same outputs.
``PersistentEmbedder`` does the same for embedding vectors, in chunks so that a killed run
keeps what it had embedded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np

from relmerge.cache import CachedAnswer, RunCache, answer_key, vector_key
from relmerge.providers.base import (
    CacheIdentified,
    LanguageModel,
    LLMRequest,
    LLMResult,
    Usage,
    innermost,
    layers,
)
from relmerge.providers.embedding import EmbeddingModel, Vectors
from relmerge.providers.parsing import parse_json_answer

# Texts embedded and stored at a time: a killed run loses at most this many vectors'
# work, and a part this large is still shared with the default embedder's helper
# process (which takes batches of 4,096 or more).
EMBED_CHUNK = 16_384


def model_identity(model: LanguageModel) -> dict[str, Any]:
    """What, besides the request, determines a model's answers.

    Providers may state it (:class:`~relmerge.providers.base.CacheIdentified`); otherwise
    the class and the model name. Wrappers (budget, rate limit) are looked through to the
    provider they hold.
    """
    stated = (
        layer
        for layer in layers(model)
        if isinstance(layer, CacheIdentified) and layer.cache_identity is not None
    )
    source = next(stated, None) or innermost(model)
    identity = source.cache_identity if isinstance(source, CacheIdentified) else None
    if isinstance(identity, dict):
        return identity
    name = source.name if isinstance(source, LanguageModel) else model.name
    return {"provider": type(source).__name__, "model": name}


def request_identity(request: LLMRequest) -> dict[str, Any]:
    return {
        "task": request.task,
        "messages": [message.to_dict() for message in request.messages],
        "schema": request.schema,
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "relaxed": request.relaxed,
        "prompt": request.prompt,
    }


class CachingModel:
    """Answers from ``cache`` when it holds the request; else asks ``inner`` and stores."""

    def __init__(self, inner: LanguageModel, cache: RunCache) -> None:
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self.available = inner.available
        self._identity = model_identity(inner)

    async def invoke(self, request: LLMRequest) -> LLMResult:
        key = answer_key(self._identity, request_identity(request))
        hit = self.cache.answer(key)
        if hit is not None:
            return LLMResult(
                text=hit.text,
                parsed=parse_json_answer(hit.text),
                model=hit.model,
                usage=Usage(hit.prompt_tokens, hit.completion_tokens),
                attempts=0,
                cached=True,
                # An answer that used the whole bound was cut there (finish_reason "length").
                truncated=request.max_tokens is not None
                and hit.completion_tokens >= request.max_tokens,
            )
        result = await self.inner.invoke(request)
        self.cache.put_answer(
            key,
            CachedAnswer(
                result.text,
                result.model,
                result.usage.prompt_tokens,
                result.usage.completion_tokens,
            ),
        )
        return result


def embedder_namespace(embedder: EmbeddingModel) -> str:
    """What determines an embedder's vectors: its stated identity, or class and model name."""
    identity = embedder.cache_identity if isinstance(embedder, CacheIdentified) else None
    return identity if isinstance(identity, str) else f"{type(embedder).__name__}:{embedder.name}"


class PersistentEmbedder:
    """Vectors from ``cache`` where present; the rest embedded by ``inner`` and stored.

    Vectors are stored as the exact float32 bytes, so a cached vector equals a fresh one.
    A run is served only the vectors stored before it began (:meth:`begin_run`): the
    default model's vector of a text differs in the last bits with the batch it shares,
    so a chunk that took a vector another chunk of the same run had just embedded would
    score differently depending on which chunk finished first — on worker processes or
    Ray, a matter of timing. Each chunk embeds its own texts instead, as on every engine.
    """

    def __init__(self, inner: EmbeddingModel, cache: RunCache) -> None:
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self._namespace = embedder_namespace(inner)
        self.embedded_texts = 0
        self._this_run: set[bytes] = set()  # keys stored since begin_run

    def begin_run(self) -> None:
        """From now on, vectors stored so far are served; those stored later are not."""
        self._this_run.clear()

    def _served(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        found = self.cache.vectors(keys)
        return {key: data for key, data in found.items() if key not in self._this_run}

    def stored(self, texts: Sequence[str]) -> dict[int, bytes]:
        """The stored vectors (float32 bytes) of those ``texts`` the cache serves, by
        position: what a worker that embeds the rest itself asks for."""
        keys = [vector_key(self._namespace, text) for text in texts]
        found = self._served(keys)
        return {i: found[key] for i, key in enumerate(keys) if key in found}

    def store(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Keep vectors (float32 bytes) a worker embedded with the same embedder."""
        keyed = [(vector_key(self._namespace, text), data) for text, data in items]
        self.cache.put_vectors(keyed)
        self._this_run.update(key for key, _ in keyed)

    async def embed(self, texts: Sequence[str]) -> Vectors:
        return await self.embed_with(texts, self.inner.embed)

    async def embed_with(
        self, texts: Sequence[str], embed: Callable[[list[str]], Awaitable[Vectors]]
    ) -> Vectors:
        """As :meth:`embed`, the missing texts embedded by ``embed`` (a model that runs
        elsewhere, such as on the workers of an engine) in parts of ``EMBED_CHUNK``."""
        keys = [vector_key(self._namespace, text) for text in texts]
        stored = self._served(keys)
        missing = [i for i, key in enumerate(keys) if key not in stored]
        for start in range(0, len(missing), EMBED_CHUNK):
            chunk = missing[start : start + EMBED_CHUNK]
            vectors = await embed([texts[i] for i in chunk])
            items = [
                (keys[i], np.ascontiguousarray(vector, np.float32).tobytes())
                for i, vector in zip(chunk, vectors, strict=True)
            ]
            self.cache.put_vectors(items)
            self._this_run.update(key for key, _ in items)
            stored.update(items)
            self.embedded_texts += len(chunk)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([np.frombuffer(stored[key], dtype=np.float32) for key in keys])


def persistent_layer(embedder: object) -> PersistentEmbedder | None:
    """The :class:`PersistentEmbedder` among ``embedder`` and what it wraps, if any."""
    found = (layer for layer in layers(embedder) if isinstance(layer, PersistentEmbedder))
    return next(found, None)
