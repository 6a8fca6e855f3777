"""Graphiti edges as relmerge records: one record per live RELATES_TO edge.

The record's id is the edge's uuid, its endpoints the entity nodes' uuids (named by the
nodes), ``name`` the edge's name, ``description`` its fact, its provenance the edge's
episodes (the first one as its chunk; the group as its document). The edge's attributes
become string attributes, and ``valid_at`` / ``invalid_at`` are added as ISO dates so that
the kernel's date guards see them: two edges valid at different times are different facts.
Entity summaries are the entities' profiles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from relmerge.adapters.common import NO_LABEL, Imported

if TYPE_CHECKING:
    from graphiti_core.edges import EntityEdge
    from graphiti_core.nodes import EntityNode

FORMAT = "graphiti"


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return orjson.dumps(value, default=str).decode()


def edge_attributes(edge: EntityEdge) -> dict[str, str]:
    """The edge's attributes as strings, plus its validity dates (ISO, UTC day)."""
    from graphiti_core.utils.datetime_utils import ensure_utc

    from relmerge.integrations.graphiti.graph import own_attributes

    found = {str(key): _text(value) for key, value in own_attributes(edge).items()}
    for name in ("valid_at", "invalid_at"):
        moment = ensure_utc(getattr(edge, name))
        if moment is not None:
            found[name] = moment.date().isoformat()
    return found


def edge_records(
    edges: Sequence[EntityEdge], nodes: Mapping[str, EntityNode], group_id: str
) -> Imported:
    """The records of ``edges`` (``origins``: uuid -> index) and their entities."""
    relations: list[dict[str, Any]] = []
    origins: dict[str, int] = {}
    for number, edge in enumerate(edges):
        chunks = [str(episode) for episode in edge.episodes if str(episode).strip()]
        source, target = nodes.get(edge.source_node_uuid), nodes.get(edge.target_node_uuid)
        relations.append(
            {
                "relation_id": edge.uuid,
                "chunk_id": chunks[0] if chunks else edge.uuid,
                "document_id": group_id,
                "source_entity_id": edge.source_node_uuid,
                "target_entity_id": edge.target_node_uuid,
                "source_entity_name": _name(source, edge.source_node_uuid),
                "target_entity_name": _name(target, edge.target_node_uuid),
                "type": NO_LABEL,
                "name": edge.name.strip() or NO_LABEL,
                "description": edge.fact.strip() or edge.name.strip() or NO_LABEL,
                "attributes": edge_attributes(edge),
                "source_chunk_ids": chunks or [edge.uuid],
            }
        )
        origins[edge.uuid] = number
    entities = [
        {
            "entity_id": node.uuid,
            "name": _name(node, node.uuid),
            "type": next((label for label in node.labels if label != "Entity"), None),
            "profile": (node.summary or "").strip() or None,
        }
        for node in nodes.values()
    ]
    counts = {"edges": len(edges), "entities": len(entities)}
    return Imported(FORMAT, relations, entities, origins, counts)


def _name(node: EntityNode | None, uuid: str) -> str:
    return (node.name.strip() if node is not None else "") or uuid
