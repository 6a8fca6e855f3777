"""The semantic stage's vectors: each distinct description embedded once, rows looked up.

What is embedded is the kernel's choice (``relmerge.decide.text``); this module keeps the
vectors of a chunk's units without a copy per unit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from relmerge.decide.scores import relation_vectors
from relmerge.providers.embedding import EmbeddingModel, Vectors, embedded_to


class Rows(Protocol):
    """Vectors of units, looked up by unit index (a small matrix per call)."""

    def __len__(self) -> int: ...

    def __getitem__(self, indices: Sequence[int] | npt.NDArray[np.intp]) -> Vectors: ...


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
        rows = self.rows[np.asarray(indices, dtype=np.intp)]
        if len(rows) and rows.min() < 0:
            raise AssertionError("a vector was asked for a unit that was not embedded")
        block: Vectors = self.matrix[rows]
        return block


class RelationRows:
    """Relation vectors (description + name, normalised) computed for the rows asked."""

    def __init__(self, descriptions: UnitVectors, names: UnitVectors) -> None:
        self.descriptions = descriptions
        self.names = names

    def __len__(self) -> int:
        return len(self.descriptions)

    def __getitem__(self, indices: Sequence[int] | npt.NDArray[np.intp]) -> Vectors:
        return relation_vectors(self.descriptions[indices], self.names[indices])


def distinct_count(texts: Sequence[str]) -> int:
    return len(set(texts))


_SHARED_BATCH = 4096  # the default embedder shares a batch this large with its helper


def _slice_size(count: int) -> int:
    """Texts per call to the embedder: small enough for progress to move, and, for a
    large batch, equal slices of at least 4,096 texts (each shared by both processes).
    The slices depend only on the distinct texts, so every engine batches them alike."""
    if count < _SHARED_BATCH:
        return 256
    slices = count // _SHARED_BATCH
    return -(-count // slices)


class _SliceProgress:
    """Progress inside one call to the embedder: the pieces it reports as they finish
    (from its threads: counted on the event loop), and the rest of the slice when the
    call returns, so the phase advances by exactly the slice whatever the embedder says."""

    def __init__(self, size: int, on_embedded: Callable[[int], None]) -> None:
        self.size = size
        self.on_embedded = on_embedded
        self.counted = 0
        self.loop = asyncio.get_running_loop()
        self.open = True

    def report(self, count: int) -> None:
        """Any thread: ``count`` more texts of the slice are embedded."""
        self.loop.call_soon_threadsafe(self._count, count)

    def _count(self, count: int) -> None:
        count = min(count, self.size - self.counted)
        if self.open and count > 0:
            self.counted += count
            self.on_embedded(count)

    def __enter__(self) -> _SliceProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.open and exc[0] is None and self.counted < self.size:
            self.on_embedded(self.size - self.counted)
        self.open = False


def wanted_texts(texts: Sequence[str], wanted: Sequence[bool] | None) -> list[str]:
    """The distinct texts of the units ``wanted`` marks (all of them without it)."""
    chosen = texts if wanted is None else [t for t, w in zip(texts, wanted, strict=True) if w]
    return list(dict.fromkeys(chosen))


async def embed_units(
    texts: Sequence[str],
    embedder: EmbeddingModel,
    wanted: Sequence[bool] | None = None,
    on_embedded: Callable[[int], None] = lambda n: None,
) -> UnitVectors:
    """Embed the distinct ``texts`` once; one row index per text. With ``wanted``, only
    the texts of the units it marks are embedded (the others' row is -1: none).
    ``on_embedded`` hears how many more distinct texts are embedded, slice by slice."""
    distinct = wanted_texts(texts, wanted)
    position = {text: row for row, text in enumerate(distinct)}
    step = _slice_size(len(distinct))
    parts = []
    for start in range(0, len(distinct), step):
        part = distinct[start : start + step]
        with _SliceProgress(len(part), on_embedded) as pieces, embedded_to(pieces.report):
            parts.append(await embedder.embed(part))
    if not parts:
        matrix: Vectors = np.zeros((0, 0), np.float32)
    else:
        matrix = parts[0] if len(parts) == 1 else np.concatenate(parts)
    if wanted is None:
        rows = np.fromiter((position[t] for t in texts), np.intp, len(texts))
    else:
        rows = np.fromiter(
            (position[t] if w else -1 for t, w in zip(texts, wanted, strict=True)),
            np.intp,
            len(texts),
        )
    return UnitVectors(matrix, rows)
