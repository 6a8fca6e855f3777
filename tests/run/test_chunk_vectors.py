"""A chunk's vectors are its own: a model whose vectors depend on the batch a text
shares (the default model's do, in the last bits) scores every chunk the same way with
or without the vector cache, in one process or on worker processes, whatever order the
chunks finish in."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from relmerge.cache import RunCache
from relmerge.config import DeduplicateRelationsConfig
from relmerge.engines.local import LocalEngine
from relmerge.engines.processes import ProcessEngine
from relmerge.providers.base import NoLanguageModel
from relmerge.providers.cached import PersistentEmbedder
from relmerge.providers.embedding import HashEmbedder, Vectors, l2_normalise
from tests.support.dev_cli import DEV
from tests.support.engines import assert_same_outputs, dev_engine_run

needs_dev = pytest.mark.skipif(not DEV.is_dir(), reason="shared dev set not present")
CHUNKED = DeduplicateRelationsConfig(records_per_chunk=40)


class BatchSensitive:
    """Hash vectors moved by an amount that depends on the batch's size: large enough
    to show in a decision's rounded scores."""

    name = "batch-sensitive"
    cache_identity = "batch-sensitive"

    def __init__(self) -> None:
        self.hash = HashEmbedder()

    async def embed(self, texts: Sequence[str]) -> Vectors:
        vectors = await self.hash.embed(texts)
        vectors[:, 0] += 0.01 * (len(texts) % 7)
        return l2_normalise(vectors)


@needs_dev
async def test_vectors_embedded_by_other_chunks_of_the_run_change_no_output(
    tmp_path: Path,
) -> None:
    uncached = await dev_engine_run(NoLanguageModel(), LocalEngine(), CHUNKED, BatchSensitive())
    cached = PersistentEmbedder(BatchSensitive(), RunCache(tmp_path / "one.sqlite"))
    one = await dev_engine_run(NoLanguageModel(), LocalEngine(), CHUNKED, cached)
    assert one[0].result["chunk_count"] > 10 and one[0].result["semantic_merge_count"] > 0
    assert_same_outputs(uncached, one, "chunk_count")

    # Worker processes: a model the workers cannot rebuild embeds in the driver, asked
    # by both workers at once.
    shared = PersistentEmbedder(BatchSensitive(), RunCache(tmp_path / "two.sqlite"))
    two = await dev_engine_run(NoLanguageModel(), ProcessEngine(2), CHUNKED, shared)
    assert_same_outputs(one, two, "chunk_count")
