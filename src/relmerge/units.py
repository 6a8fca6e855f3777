"""``Unit``: a current relation plus the original input records it stands for.

Stages work on units so that a relation merged in one round can merge again later while
the ids, chunk ids and representative are always derived from the original records.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from relmerge.ids import dedup_chunk_id, merged_relation_id
from relmerge.model import ExtractedRelation


class Originals(Protocol):
    """The input records by input index: the whole batch (a list) or a chunk (a dict)."""

    def __getitem__(self, index: int, /) -> ExtractedRelation: ...


@dataclass(frozen=True)
class Unit:
    """``members`` are indices into the run's input order, sorted; they never overlap."""

    relation: ExtractedRelation
    members: tuple[int, ...]

    @property
    def first(self) -> int:
        return self.members[0]


def merge_units(
    units: Sequence[Unit],
    originals: Originals,
    fields: dict[str, Any],
    lead: Unit | None = None,
) -> Unit:
    """Fuse ``units`` into one relation carrying ``fields`` (type, name, description, attrs).

    The representative is the member that comes first in input order: it gives
    ``document_id`` and, unless a ``lead`` is given, the endpoint names and ids. A ``lead``
    (one of ``units``) gives the direction instead: the semantic stage passes its first
    directed member when a symmetric representative was merged with directed relations,
    so that the output states the directed fact the right way round (DESIGN §2: the
    representative gives the direction of a symmetric relation). Chunk ids are aggregated
    in input order. A single unit is returned unchanged: merging with nothing keeps id and
    content.
    """
    if len(units) == 1:
        return units[0]
    members = tuple(sorted(index for unit in units for index in unit.members))
    first = min(units, key=lambda unit: unit.first)
    representative, ends = first.relation, (lead or first).relation
    chunk_ids = list(dict.fromkeys(c for i in members for c in originals[i].chunk_ids()))
    merged = ExtractedRelation.model_construct(
        relation_id=merged_relation_id((originals[i].relation_id for i in members), fields["name"]),
        chunk_id=dedup_chunk_id(chunk_ids),
        document_id=representative.document_id,
        source_entity_id=ends.source_entity_id,
        target_entity_id=ends.target_entity_id,
        source_entity_name=ends.source_entity_name,
        target_entity_name=ends.target_entity_name,
        type=fields["type"],
        name=fields["name"],
        description=fields["description"],
        attributes=dict(fields.get("attributes") or {}),
        source_chunk_ids=chunk_ids,
    )
    return Unit(merged, members)


def member_ids(units: Iterable[Unit], originals: Originals) -> list[str]:
    """Original input ids behind ``units``, in input order."""
    return [originals[i].relation_id for i in sorted(i for u in units for i in u.members)]
