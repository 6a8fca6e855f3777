"""Possible entity duplicates: the same relation toward two different entities.

A relation dedup must never merge entities, so near-identical relations in *different*
blocks are only reported (``possible_entity_duplicate``) for the upstream entity step.
Candidates are relations that share one endpoint in the same role; each entity's list is
capped at ``entity_report_limit`` relations, so the pass stays linear in N.
The pass runs after all chunks of blocks: :class:`EntityReport` collects each chunk's
relations (ids and names) and parks their vectors in a temporary file, so the report
holds no vector in memory beyond one entity's list at a time. A report also
needs the two other endpoints' names to be alike (token-set fuzzy ≥ 90 or name cosine ≥
0.85), so that "a province has subdivision Linwood" and "… Linford" are not reported.
"""

from __future__ import annotations

import os
import tempfile
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from rapidfuzz import fuzz

from relmerge.model import IssueResolution, IssueSubject, StepIssue
from relmerge.normalize import normalize_key_text
from relmerge.providers.embedding import EmbeddingModel, Vectors
from relmerge.stages.semantic.text import Rows
from relmerge.units import Unit

# Names must look alike ("Acme Systems" / "Acme Systems Inc.") or mean the same across
# languages ("Munich" / "慕尼黑"); "Linwood" / "Linford" (fuzzy 71) must not.
NAME_FUZZY = 90.0
NAME_COSINE = 0.85


def names_alike(left: str, right: str, cosine: float) -> bool:
    """Two entity names that may name one entity: alike as token sets, or in meaning."""
    if cosine >= NAME_COSINE:
        return True
    return fuzz.token_set_ratio(normalize_key_text(left), normalize_key_text(right)) >= NAME_FUZZY


class ReportSink(Protocol):
    """Where the semantic stage hands a chunk's units for the report."""

    def add(self, units: Sequence[Unit], vectors: Rows, embedded: Sequence[bool]) -> None: ...


@dataclass
class ReportPart:
    """One chunk's entries for the report, as plain values (they travel from a worker):
    per unit its first input index, id, endpoint ids and names, and its relation vector
    where it has one (``has_vector``; the rows of ``vectors`` are those units, in order)."""

    firsts: list[int] = field(default_factory=list)
    relation_ids: list[str] = field(default_factory=list)
    ends: list[tuple[str, str]] = field(default_factory=list)
    names: list[tuple[str, str]] = field(default_factory=list)
    has_vector: list[bool] = field(default_factory=list)
    vectors: Vectors = field(default_factory=lambda: np.zeros((0, 0), np.float32))

    def add(self, units: Sequence[Unit], vectors: Rows, embedded: Sequence[bool]) -> None:
        """A :class:`ReportSink`: keeps the units, and the vectors of the ``embedded``."""
        rows = [i for i, has in enumerate(embedded) if has]
        matrices = [
            np.ascontiguousarray(vectors[rows[start : start + 4096]], dtype=np.float32)
            for start in range(0, len(rows), 4096)
        ]
        if self.has_vector and matrices:
            matrices.insert(0, self.vectors)
        if matrices:
            self.vectors = np.concatenate(matrices) if len(matrices) > 1 else matrices[0]
        for unit, has in zip(units, embedded, strict=True):
            relation = unit.relation
            self.firsts.append(unit.first)
            self.relation_ids.append(relation.relation_id)
            self.ends.append((relation.source_entity_id, relation.target_entity_id))
            self.names.append((relation.source_entity_name, relation.target_entity_name))
            self.has_vector.append(bool(has))


class EntityReport:
    """Collects relations chunk by chunk; :meth:`issues` compares them at the end."""

    def __init__(self, threshold: float, limit: int) -> None:
        self.threshold = threshold
        self.limit = limit
        self._firsts: array[int] = array("q")
        self._ends: array[int] = array("q")  # source, target entity numbers, per relation
        self._names: array[int] = array("q")  # source, target name numbers, per relation
        self._vector_rows: array[int] = array("q")  # row in the vector file, or -1
        self._relation_ids: list[str] = []
        self._entities: dict[str, int] = {}
        self._texts: dict[str, int] = {}
        self._vectors = tempfile.TemporaryFile(prefix="relmerge-report-")  # noqa: SIM115 (closed by close())
        self._row_bytes = 0
        self._vector_count = 0

    def _number(self, table: dict[str, int], value: str) -> int:
        return table.setdefault(value, len(table))

    def add(self, units: Sequence[Unit], vectors: Rows, embedded: Sequence[bool]) -> None:
        """One chunk's units (and the relation vectors, as rows, of those ``embedded``)."""
        if self.limit <= 0 or not units:
            return
        part = ReportPart()
        part.add(units, vectors, embedded)
        self.add_part(part)

    def add_part(self, part: ReportPart) -> None:
        """One chunk's entries, as a worker collected them."""
        if self.limit <= 0 or not part.firsts:
            return
        if len(part.vectors):
            matrix = np.ascontiguousarray(part.vectors, dtype=np.float32)
            self._row_bytes = matrix.shape[1] * 4
            self._vectors.write(matrix.tobytes())
        for i, first in enumerate(part.firsts):
            self._firsts.append(first)
            for end in part.ends[i]:
                self._ends.append(self._number(self._entities, end))
            for name in part.names[i]:
                self._names.append(self._number(self._texts, name))
            self._relation_ids.append(part.relation_ids[i])
            if part.has_vector[i]:
                self._vector_rows.append(self._vector_count)
                self._vector_count += 1
            else:
                self._vector_rows.append(-1)

    def _rows(self, rows: Sequence[int]) -> Vectors:
        self._vectors.flush()
        descriptor = self._vectors.fileno()
        size = self._row_bytes
        data = b"".join(os.pread(descriptor, size, self._vector_rows[row] * size) for row in rows)
        return np.frombuffer(data, dtype=np.float32).reshape(len(rows), -1)

    def close(self) -> None:
        self._vectors.close()

    async def issues(self, embedder: EmbeddingModel) -> list[StepIssue]:
        """The ``possible_entity_duplicate`` issues of every relation added."""
        try:
            return await self._issues(embedder)
        finally:
            self.close()

    async def _issues(self, embedder: EmbeddingModel) -> list[StepIssue]:
        count = len(self._relation_ids)
        if self.limit <= 0 or count < 2:
            return []
        order = sorted(range(count), key=self._firsts.__getitem__)  # input order
        by_anchor: dict[tuple[int, int], list[int]] = {}
        for row in order:
            for role in (0, 1):
                members = by_anchor.setdefault((self._ends[2 * row + role], role), [])
                if len(members) < self.limit:
                    members.append(row)
        ids = list(self._entities)
        candidates: dict[tuple[int, int], tuple[int, int, float]] = {}
        for (_, role), capped in by_anchor.items():
            # A relation without a vector has no partner whose other endpoint's name looks
            # alike (``report_candidates``): no pair of it could be reported.
            members = [row for row in capped if self._vector_rows[row] >= 0]
            if len(members) < 2:
                continue
            block = self._rows(members)
            cosine = block @ block.T
            rows, cols = np.nonzero(np.triu(cosine >= self.threshold, k=1))
            for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
                other_a = self._ends[2 * members[r] + 1 - role]
                other_b = self._ends[2 * members[c] + 1 - role]
                if other_a == other_b:
                    continue
                key = (other_a, other_b) if ids[other_a] < ids[other_b] else (other_b, other_a)
                if key not in candidates or cosine[r, c] > candidates[key][2]:
                    candidates[key] = (members[r], members[c], float(cosine[r, c]))
        if not candidates:
            return []
        return await self._report(candidates, ids, embedder)

    async def _report(
        self,
        candidates: dict[tuple[int, int], tuple[int, int, float]],
        ids: list[str],
        embedder: EmbeddingModel,
    ) -> list[StepIssue]:
        texts = list(self._texts)
        names: dict[str, str] = {}
        for first, second, _ in candidates.values():
            for row in (first, second):
                for role in (0, 1):
                    names[ids[self._ends[2 * row + role]]] = texts[self._names[2 * row + role]]
        by_id = {(ids[left], ids[right]): found for (left, right), found in candidates.items()}
        name_ids = sorted({entity for key in by_id for entity in key})
        name_vectors = await embedder.embed([names[e] for e in name_ids])
        position = {entity: i for i, entity in enumerate(name_ids)}
        issues = []
        for (left, right), (first, second, score) in sorted(by_id.items()):
            cosine = float(name_vectors[position[left]] @ name_vectors[position[right]])
            if not names_alike(names[left], names[right], cosine):
                continue
            issues.append(
                StepIssue(
                    subject=IssueSubject(type="entity_pair", id=f"{left}|{right}"),
                    code="possible_entity_duplicate",
                    severity="info",
                    message=(
                        f"relations {self._relation_ids[first]} and "
                        f"{self._relation_ids[second]} "
                        f"state the same relation (cosine {score:.2f}) toward {names[left]!r} "
                        f"({left}) and {names[right]!r} ({right}); if they are one entity, "
                        "fix the entity mapping upstream"
                    ),
                    resolution=IssueResolution(
                        action="reported",
                        outcome="Nothing was merged: relation deduplication never merges entities.",
                    ),
                )
            )
        return issues
