"""Pair scores: what a pair's wording and meaning have in common, in the right mode.

A relation name is evidence only when it can tell two facts apart. Where it cannot — it
is empty or "related"-like, it is shared by a large part of the batch (GraphRAG and
nano-graphrag name nearly every relation "related"), or both records carry the same name
(LightRAG writes one keywords string for every extraction it joined into an edge) — the
pair is scored on its descriptions alone (``description`` mode): with the name inside,
a shared name dominates both the fuzzy ratio and the cosine. Otherwise (``full`` mode)
the fuzzy ratio covers name + description + attribute values, and the cosine is that of
the *relation vectors*: the sum of the name's and the description's vectors, normalised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from rapidfuzz import fuzz, process

from relmerge.decide.features import RelationFeatures

Mode = Literal["full", "description"]
Vectors = npt.NDArray[np.float32]  # L2-normalised rows: a dot product is a cosine


def pair_mode(a: RelationFeatures, b: RelationFeatures) -> Mode:
    if a.shared_name or b.shared_name or a.name == b.name:
        return "description"
    return "full"


def relation_vectors(descriptions: Vectors, names: Vectors) -> Vectors:
    """Rows of normalised (description + name) vectors: one vector per relation."""
    summed = descriptions + names
    norms = np.linalg.norm(summed, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    result: Vectors = (summed / norms).astype(np.float32, copy=False)
    return result


@dataclass(frozen=True)
class PairScores:
    mode: Mode
    fuzzy: float
    cosine: float  # relation vectors (full mode) or description vectors (description mode)
    name_cosine: float

    def as_dict(self) -> dict[str, float]:
        return {
            "fuzzy": round(self.fuzzy, 2),
            "cosine": round(self.cosine, 4),
            "name_cosine": round(self.name_cosine, 4),
        }


class BlockFuzzy:
    """A block's pair modes and fuzzy ratios (only for the modes some pair uses): the
    part of its scores that needs no vector, so it can be computed once, before the
    vectors (see ``relmerge.stages.semantic.two_stage``), and used again with them."""

    def __init__(self, features: list[RelationFeatures]) -> None:
        size = len(features)
        self.modes = {
            (a, b): pair_mode(features[a], features[b])
            for a in range(size)
            for b in range(a + 1, size)
        }
        used = set(self.modes.values())
        self.ratios: dict[Mode, npt.NDArray[np.float32]] = {}
        if "full" in used:
            texts = [f.text for f in features]
            self.ratios["full"] = process.cdist(
                texts, texts, scorer=fuzz.ratio, dtype=np.float32, workers=1
            )
        if "description" in used:
            texts = [f.description_text for f in features]
            self.ratios["description"] = process.cdist(
                texts, texts, scorer=fuzz.ratio, dtype=np.float32, workers=1
            )

    def mode(self, a: int, b: int) -> Mode:
        return self.modes[(a, b) if a < b else (b, a)]

    def ratio(self, a: int, b: int) -> float:
        return float(self.ratios[self.mode(a, b)][a, b])


class BlockScores:
    """Every score a block's pairs may need, computed in matrices; ``fuzzy``: the block's
    fuzzy ratios when they were computed already (:class:`BlockFuzzy` of ``features``)."""

    def __init__(
        self,
        features: list[RelationFeatures],
        descriptions: Vectors,
        names: Vectors,
        fuzzy: BlockFuzzy | None = None,
    ) -> None:
        self.features = features
        self.fuzzy = fuzzy if fuzzy is not None else BlockFuzzy(features)
        self.modes = self.fuzzy.modes
        relations = relation_vectors(descriptions, names)
        self._cosine: dict[Mode, Vectors] = {
            "full": relations @ relations.T,
            "description": descriptions @ descriptions.T,
        }
        self._names = names @ names.T

    def pair(self, a: int, b: int) -> PairScores:
        mode = self.fuzzy.mode(a, b)
        return PairScores(
            mode,
            self.fuzzy.ratio(a, b),
            float(self._cosine[mode][a, b]),
            float(self._names[a, b]),
        )
