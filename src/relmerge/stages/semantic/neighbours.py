"""Possible entity duplicates: the same relation toward two different entities.

A relation dedup must never merge entities, so near-identical relations in *different*
blocks are only reported (``possible_entity_duplicate``) for the upstream entity step.
Candidates are relations that share one endpoint in the same role; each entity's list is
capped at ``entity_report_limit`` relations, so the pass stays linear in N. A report also
needs the two other endpoints' names to be alike (token-set fuzzy ≥ 90 or name cosine ≥
0.85), so that "Jiangsu has subdivision Nanjing" and "… Nantong" are not reported.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rapidfuzz import fuzz

from relmerge.model import IssueResolution, IssueSubject, StepIssue
from relmerge.normalize import normalize_key_text
from relmerge.providers.embedding import EmbeddingModel
from relmerge.stages.semantic.text import UnitVectors
from relmerge.stages.units import Unit

# Names must look alike ("Norrbeck Systems" / "Norrbeck Systems Inc.") or mean the same
# across languages ("Shanghai" / "上海市"); "Hangzhou" / "Taizhou" (fuzzy 67) must not.
_NAME_FUZZY = 90.0
_NAME_COSINE = 0.85


async def possible_entity_duplicates(
    units: Sequence[Unit],
    vectors: UnitVectors,
    embedder: EmbeddingModel,
    threshold: float,
    limit: int,
) -> list[StepIssue]:
    if limit <= 0 or len(units) < 2:
        return []
    by_anchor: dict[tuple[str, int], list[int]] = {}
    for index, unit in enumerate(units):
        relation = unit.relation
        for role, anchor in enumerate((relation.source_entity_id, relation.target_entity_id)):
            members = by_anchor.setdefault((anchor, role), [])
            if len(members) < limit:
                members.append(index)
    candidates: dict[tuple[str, str], tuple[int, int, float]] = {}
    for (_, role), members in by_anchor.items():
        if len(members) < 2:
            continue
        block = vectors[members]
        cosine = block @ block.T
        rows, cols = np.nonzero(np.triu(cosine >= threshold, k=1))
        for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
            rel_a, rel_b = units[members[r]].relation, units[members[c]].relation
            other_a = rel_a.target_entity_id if role == 0 else rel_a.source_entity_id
            other_b = rel_b.target_entity_id if role == 0 else rel_b.source_entity_id
            if other_a == other_b:
                continue
            key = (min(other_a, other_b), max(other_a, other_b))
            if key not in candidates or cosine[r, c] > candidates[key][2]:
                candidates[key] = (members[r], members[c], float(cosine[r, c]))
    if not candidates:
        return []
    issues = []
    names: dict[str, str] = {}
    for first, second, _ in candidates.values():
        for unit in (units[first], units[second]):
            relation = unit.relation
            names[relation.source_entity_id] = relation.source_entity_name
            names[relation.target_entity_id] = relation.target_entity_name
    name_ids = sorted({entity for key in candidates for entity in key})
    name_vectors = await embedder.embed([names[e] for e in name_ids])
    position = {entity: i for i, entity in enumerate(name_ids)}
    for (left, right), (first, second, score) in sorted(candidates.items()):
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
                    f"relations {units[first].relation.relation_id} and "
                    f"{units[second].relation.relation_id} "
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
