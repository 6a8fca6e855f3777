"""An embedder that asks the relation store first (DESIGN §8, "cost grows with the batch").

A stored relation's text is embedded once, when it first meets a merge: later merges
read its vector from the store (keyed by text and the embedder's name). Vectors a merge
computes are kept in :attr:`StoreEmbedder.new` and put back with :meth:`save`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from relmerge.graphstore.base import RelationStore
from relmerge.providers.embedding import EmbeddingModel, Vectors


class StoreEmbedder:
    """``inner`` behind the store's vector cache."""

    def __init__(self, inner: EmbeddingModel, store: RelationStore) -> None:
        self.inner = inner
        self.store = store
        self.name = inner.name
        self.new: dict[str, bytes] = {}
        self.from_store = 0
        self.computed = 0

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return await self.inner.embed(texts)
        wanted = list(dict.fromkeys(texts))
        known = {
            text: np.frombuffer(data, dtype=np.float32)
            for text, data in (await self.store.vectors(self.name, wanted)).items()
        }
        self.from_store += len(known)
        missing = [text for text in wanted if text not in known]
        if missing:
            vectors = await self.inner.embed(missing)
            self.computed += len(missing)
            for text, row in zip(missing, vectors, strict=True):
                row = np.asarray(row, dtype=np.float32)
                known[text] = row
                self.new[text] = row.tobytes()
        return np.stack([known[text] for text in texts])

    async def save(self) -> int:
        """Put the vectors computed since the last save into the store; how many."""
        if not self.new:
            return 0
        new, self.new = self.new, {}
        await self.store.put_vectors(self.name, new)
        return len(new)
