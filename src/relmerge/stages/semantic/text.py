"""The text of a relation for scoring.

Inside a block both endpoints are the same entities, so the embedded text is the relation
itself — name, description, attribute values — without endpoint names or type label:
on the dev set that keeps same-fact pairs apart from different-fact pairs far better
(pairs at cosine ≥ 0.8 are 98% same-fact, against 81% when names and type are included),
and type labels differ by language ("空间关系" / "spatial") without changing the fact.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from relmerge.model import ExtractedRelation
from relmerge.normalize import normalize_key_text
from relmerge.providers.embedding import EmbeddingModel, Vectors
from relmerge.stages.semantic.lexicon import load_lexicon

GENERIC_NAMES = load_lexicon().generic


def embedding_text(relation: ExtractedRelation, description_chars: int) -> str:
    """Name, description and attribute values; a generic name ("related") is left out, as
    it would pull every relation of a GraphRAG or LightRAG graph towards every other."""
    description = relation.description[:description_chars]
    attributes = " ".join(f"{k}: {v}" for k, v in relation.attributes.items())
    if description == relation.name or normalize_key_text(relation.name) in GENERIC_NAMES:
        return f"{description} {attributes}".strip()
    return f"{relation.name}: {description} {attributes}".strip()


class UnitVectors:
    """The vectors of units as rows of a matrix of their distinct texts.

    At scale most memory of the stage is vectors; many units share a text (repeated
    mentions), so the stage embeds each distinct text once and looks rows up instead of
    holding one copy per unit. ``vectors[indices]`` gives a small per-block matrix.
    """

    def __init__(self, matrix: Vectors, rows: npt.NDArray[np.intp]) -> None:
        self.matrix = matrix
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, indices: Sequence[int] | npt.NDArray[np.intp]) -> Vectors:
        block: Vectors = self.matrix[self.rows[np.asarray(indices, dtype=np.intp)]]
        return block


async def embed_units(texts: Sequence[str], embedder: EmbeddingModel) -> UnitVectors:
    """Embed the distinct ``texts`` once; one row index per text."""
    distinct = list(dict.fromkeys(texts))
    position = {text: row for row, text in enumerate(distinct)}
    matrix = await embedder.embed(distinct)
    return UnitVectors(matrix, np.fromiter((position[t] for t in texts), np.intp, len(texts)))
