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

import numpy as np
from rapidfuzz import fuzz

from relmerge.model import IssueResolution, IssueSubject, StepIssue
from relmerge.normalize import normalize_key_text
from relmerge.providers.embedding import EmbeddingModel, Vectors
from relmerge.stages.semantic.text import Rows
from relmerge.units import Unit

# Names must look alike ("Acme Systems" / "Acme Systems Inc.") or mean the same across
# languages ("Munich" / "慕尼黑"); "Linwood" / "Linford" (fuzzy 71) must not.
_NAME_FUZZY = 90.0
_NAME_COSINE = 0.85


class EntityReport:
    """Collects relations chunk by chunk; :meth:`issues` compares them at the end."""

    def __init__(self, threshold: float, limit: int) -> None:
        self.threshold = threshold
        self.limit = limit
        self._firsts: array[int] = array("q")
        self._ends: array[int] = array("q")  # source, target entity numbers, per relation
        self._names: array[int] = array("q")  # source, target name numbers, per relation
        self._relation_ids: list[str] = []
        self._entities: dict[str, int] = {}
        self._texts: dict[str, int] = {}
        self._vectors = tempfile.TemporaryFile(prefix="relmerge-report-")  # noqa: SIM115 (closed by close())
        self._row_bytes = 0

    def _number(self, table: dict[str, int], value: str) -> int:
        return table.setdefault(value, len(table))

    def add(self, units: Sequence[Unit], vectors: Rows) -> None:
        """One chunk's units (and their relation vectors, as rows)."""
        if self.limit <= 0 or not units:
            return
        for start in range(0, len(units), 4096):  # a slice at a time: no copy of them all
            rows = np.arange(start, min(start + 4096, len(units)))
            matrix = np.ascontiguousarray(vectors[rows], dtype=np.float32)
            self._row_bytes = matrix.shape[1] * 4
            self._vectors.write(matrix.tobytes())
        for unit in units:
            relation = unit.relation
            self._firsts.append(unit.first)
            self._ends.append(self._number(self._entities, relation.source_entity_id))
            self._ends.append(self._number(self._entities, relation.target_entity_id))
            self._names.append(self._number(self._texts, relation.source_entity_name))
            self._names.append(self._number(self._texts, relation.target_entity_name))
            self._relation_ids.append(relation.relation_id)

    def _rows(self, rows: Sequence[int]) -> Vectors:
        self._vectors.flush()
        descriptor = self._vectors.fileno()
        data = b"".join(
            os.pread(descriptor, self._row_bytes, row * self._row_bytes) for row in rows
        )
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
        for (_, role), members in by_anchor.items():
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
            name_fuzzy = fuzz.token_set_ratio(
                normalize_key_text(names[left]), normalize_key_text(names[right])
            )
            name_cosine = float(name_vectors[position[left]] @ name_vectors[position[right]])
            if name_fuzzy < _NAME_FUZZY and name_cosine < _NAME_COSINE:
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
