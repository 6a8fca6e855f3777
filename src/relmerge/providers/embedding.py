"""The embedding protocol (DESIGN §4): ``async embed(texts) -> vectors``.

Vectors are float32 rows, L2-normalised, so a dot product is a cosine. ``CachedEmbedder``
embeds each distinct text once per run, whatever the provider.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from relmerge.normalize import normalize_key_text

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class EmbeddingModel(Protocol):
    name: str

    async def embed(self, texts: Sequence[str]) -> Vectors: ...


def l2_normalise(vectors: npt.NDArray[np.floating]) -> Vectors:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    normalised: Vectors = (vectors / norms).astype(np.float32)
    return normalised


class CachedEmbedder:
    """Wraps an embedder so that the same text is never embedded twice (per instance)."""

    def __init__(self, inner: EmbeddingModel) -> None:
        self.inner = inner
        self.name = inner.name
        self._cache: dict[str, npt.NDArray[np.float32]] = {}
        self.embedded_texts = 0

    async def embed(self, texts: Sequence[str]) -> Vectors:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            vectors = await self.inner.embed(missing)
            self.embedded_texts += len(missing)
            for text, vector in zip(missing, vectors, strict=True):
                self._cache[text] = vector
            if len(missing) == len(texts):  # all new and distinct: no second copy
                return vectors
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


class HashEmbedder:
    """Model-free lexical vectors: hashed character n-grams (2- and 3-grams, CJK 1- and
    2-grams). Tiny and instant; only lexical overlap, so no cross-language matches."""

    name = "hash"

    def __init__(self, dim: int = 512) -> None:
        self.dim = dim
        self.cache_identity = f"hash:{dim}"

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
