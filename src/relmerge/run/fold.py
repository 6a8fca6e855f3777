"""What a merge's decisions do to a store: the kernel's output clusters as a :class:`Plan`
of inserts, updates (folds) and the id mapping (DESIGN §8).

A merge decides stored relations ("pinned", input indices below ``stored``) and new ones
together; a cluster holds at most one stored relation (stored pairs are a hard keep).
A cluster with a stored member keeps the stored id and record, and folds the new
members in: chunk ids appended without repeats, the kernel's merged description (the
"nothing lost" rule, or the LLM's validated fusion), attributes added where the stored
relation has no value. A cluster without one is a new relation, inserted with its id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import orjson

from relmerge.ids import dedup_chunk_id, merged_relation_id
from relmerge.model import ExtractedRelation

Produced = tuple[tuple[int, ...], str, bytes]


@dataclass
class Plan:
    """A merge's writes: ``inserts`` and ``updates`` by relation id, and each new input
    id's stored id (``mapping``)."""

    inserts: dict[str, ExtractedRelation] = field(default_factory=dict)
    updates: dict[str, ExtractedRelation] = field(default_factory=dict)
    mapping: dict[str, str] = field(default_factory=dict)

    def add(self, other: Plan) -> None:
        self.inserts.update(other.inserts)
        self.updates.update(other.updates)
        self.mapping.update(other.mapping)


def folded_into(stored: ExtractedRelation, merged: ExtractedRelation) -> ExtractedRelation:
    """``stored`` with what ``merged`` (its cluster, as the kernel wrote it) adds: it keeps
    its id, endpoints, name and type; nothing it holds is dropped."""
    chunk_ids = list(dict.fromkeys([*stored.source_chunk_ids, *merged.source_chunk_ids]))
    attributes = dict(stored.attributes)
    for key, value in merged.attributes.items():
        attributes.setdefault(key, value)
    grew = len(chunk_ids) > len(stored.source_chunk_ids)
    chunk_id = dedup_chunk_id(chunk_ids) if grew else stored.chunk_id
    return stored.model_copy(
        update={
            "chunk_id": chunk_id,
            "description": merged.description or stored.description,
            "attributes": attributes,
            "source_chunk_ids": chunk_ids,
        }
    )


def free_id(relation: ExtractedRelation, members: Sequence[str], taken: set[str]) -> str:
    """The relation's id, or a salted hash of its members when a stored relation or an
    input already has it (a merged id is predictable)."""
    if relation.relation_id not in taken:
        return relation.relation_id
    salt = 1
    while (new_id := merged_relation_id(members, relation.name, salt)) in taken:
        salt += 1
    return new_id


def plan_writes(
    outputs: Iterable[Produced],
    originals: Sequence[ExtractedRelation],
    stored: int,
    taken: set[str],
    stored_ids: set[str],
) -> Plan:
    """The writes of the kernel's ``outputs`` (members, id, JSON): ``originals`` by input
    index, the first ``stored`` of them stored relations. ``taken``: ids in use, input
    and stored (it grows); ``stored_ids``: those of stored relations, which a new
    relation never takes (an input that reuses one gets a salted id)."""
    plan = Plan()
    for members, _, data in outputs:
        pinned = [m for m in members if m < stored]
        new = [originals[m].relation_id for m in members if m >= stored]
        if not new:
            continue  # a stored relation nothing joined
        if len(pinned) > 1:  # a bug, never input: stored pairs are a hard keep
            raise AssertionError("a merge joined two stored relations")
        merged = ExtractedRelation.model_construct(**orjson.loads(data))
        if pinned:
            base = plan.updates.get(originals[pinned[0]].relation_id, originals[pinned[0]])
            target = folded_into(base, merged)
            plan.updates[target.relation_id] = target
        else:
            if (
                len(members) > 1
                or merged.relation_id in plan.inserts
                or merged.relation_id in stored_ids
            ):
                relation_id = free_id(merged, new, taken)
                merged = merged.model_copy(update={"relation_id": relation_id})
            target = merged
            taken.add(target.relation_id)
            plan.inserts[target.relation_id] = target
        for input_id in new:
            plan.mapping[input_id] = target.relation_id
    return plan
