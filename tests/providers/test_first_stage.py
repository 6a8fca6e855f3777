"""The default embedder's first stage: the model's own head over per-token rows."""

from __future__ import annotations

import numpy as np

from relmerge.providers.embedding import CachedEmbedder, HashEmbedder, first_stage_of
from relmerge.providers.use_embed import UseEmbedder, encode_rows
from relmerge.providers.use_static import UseFirstStage

TEXTS = [
    "Alice works at Acme Corp as an engineer.",
    "爱丽丝在Acme公司担任工程师。",
    "Alice travaille chez Acme Corp comme ingénieure.",
    "Acme Corp acquired Beta Labs in 2019 for $2 billion.",
    "The river flows through the capital of the province.",
    "",
]


def _unit(rows: np.ndarray) -> np.ndarray:
    unit: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return unit


async def test_first_stage_vectors_are_normalised_stable_and_near_the_models_own() -> None:
    embedder = UseEmbedder(processes=1)
    first = embedder.first_stage()
    assert isinstance(first, UseFirstStage)
    vectors = await first.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 512) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # A text's vector does not depend on the batch it came in, nor on what came before.
    again = await UseEmbedder(processes=1).first_stage().embed(list(reversed(TEXTS)))
    assert np.allclose(vectors, again[::-1], atol=1e-5)
    full = _unit(encode_rows(TEXTS))
    agreement = np.sum(vectors * full, axis=1)
    assert agreement[:-1].min() > 0.5  # an approximation of the model, not another model
    # The model's cross-language pairs stay close; an unrelated fact stays further.
    assert vectors[0] @ vectors[2] > vectors[0] @ vectors[4]


async def test_token_rows_are_computed_once_per_token_seen() -> None:
    first = UseEmbedder(processes=1).first_stage()
    await first.embed(TEXTS[:1])
    table = first._table
    assert table is not None
    seen = table.count
    await first.embed(TEXTS[:1] * 3)
    assert table.count == seen  # nothing new
    await first.embed(TEXTS[1:2])
    assert table.count > seen


def test_the_first_stage_is_found_under_wrappers_and_only_where_one_exists() -> None:
    use = UseEmbedder(processes=1)
    assert first_stage_of(CachedEmbedder(use)) is use.first_stage()
    assert first_stage_of(CachedEmbedder(HashEmbedder())) is None
