"""A Graphiti group read and written through graphiti-core's own classes.

Every backend graphiti-core drives (FalkorDB, Kuzu, Neo4j…) is reached by the same calls:
``EntityEdge`` / ``EntityNode`` / ``EpisodicNode`` readers and ``save`` / ``delete_by_uuids``.
The group's edges are read unpaged: graphiti's cursor paging (``uuid < $cursor``) repeats
pages on FalkorDB, whose range index compares strings by their first character only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphiti_core.driver.driver import GraphDriver
    from graphiti_core.edges import EntityEdge
    from graphiti_core.nodes import EntityNode, EpisodicNode

EdgeFields = dict[str, Any]
DATES = ("created_at", "expired_at", "valid_at", "invalid_at", "reference_time")


async def group_driver(driver: GraphDriver, group_id: str) -> GraphDriver:
    """The driver that sees ``group_id``: on FalkorDB a group is a graph of its own (a
    clone of the driver, its index task awaited); elsewhere the driver itself."""
    from graphiti_core.driver.driver import GraphProvider

    if driver.provider != GraphProvider.FALKORDB:
        return driver
    cloned = driver.clone(database=group_id)
    task = getattr(cloned, "_init_task", None)
    if cloned is not driver and task is not None:
        await task  # the clone builds its indexes in a task: writing first races it
    return cloned


@dataclass
class GroupEdges:
    """A group's RELATES_TO edges (embeddings loaded), the live ones apart from the
    expired ones (``expired_at`` set: never read as records, never written)."""

    live: list[EntityEdge] = field(default_factory=list)
    expired: list[EntityEdge] = field(default_factory=list)


async def read_edges(driver: GraphDriver, group_id: str) -> GroupEdges:
    """Every edge of the group with its embedding (saving one without would erase it)."""
    from graphiti_core.edges import EntityEdge
    from graphiti_core.errors import GroupsEdgesNotFoundError

    try:
        edges = await EntityEdge.get_by_group_ids(driver, [group_id], with_embeddings=True)
    except GroupsEdgesNotFoundError:  # graphiti's answer for a group with no edge
        edges = []
    edges.sort(key=lambda edge: (_stamp(edge.created_at), edge.uuid))  # input order: oldest first
    read = GroupEdges()
    for edge in edges:
        (read.live if edge.expired_at is None else read.expired).append(edge)
    return read


def _stamp(moment: Any) -> str:
    from graphiti_core.utils.datetime_utils import ensure_utc

    utc = ensure_utc(moment)
    return "" if utc is None else utc.isoformat()


async def read_nodes(driver: GraphDriver, uuids: Iterable[str]) -> dict[str, EntityNode]:
    """The entity nodes by uuid (missing ones omitted)."""
    from graphiti_core.nodes import EntityNode

    wanted = list(dict.fromkeys(uuids))
    if not wanted:
        return {}
    return {node.uuid: node for node in await EntityNode.get_by_uuids(driver, wanted)}


async def read_episodes(driver: GraphDriver, uuids: Iterable[str]) -> dict[str, EpisodicNode]:
    """The episodes by uuid (missing ones omitted)."""
    from graphiti_core.nodes import EpisodicNode

    wanted = list(dict.fromkeys(uuids))
    if not wanted:
        return {}
    return {node.uuid: node for node in await EpisodicNode.get_by_uuids(driver, wanted)}


async def read_edge(driver: GraphDriver, uuid: str) -> EntityEdge | None:
    """The edge as it is now (without its embedding), or None when it is gone."""
    from graphiti_core.edges import EntityEdge

    found = await EntityEdge.get_by_uuids(driver, [uuid])
    return found[0] if found else None


# ``EntityEdge.save`` on FalkorDB stores the endpoints as properties ``source_uuid`` /
# ``target_uuid`` too, and graphiti's reader hands them back among the attributes.
SAVED_ENDPOINTS = ("source_uuid", "target_uuid")


def own_attributes(edge: EntityEdge) -> dict[str, Any]:
    """The edge's attributes without the endpoint copies graphiti's own save leaves."""
    ends = (edge.source_node_uuid, edge.target_node_uuid)
    return {
        key: value
        for key, value in (edge.attributes or {}).items()
        if not (key in SAVED_ENDPOINTS and value in ends)
    }


def edge_fields(edge: EntityEdge) -> EdgeFields:
    """Every field of an edge, embedding included, dates as ISO strings in UTC (Kuzu hands
    them back naive), attributes its own: what ``EntityEdge(**fields)`` rebuilds it from."""
    from graphiti_core.utils.datetime_utils import ensure_utc

    dated: dict[str, Any] = {name: ensure_utc(getattr(edge, name, None)) for name in DATES}
    dated["attributes"] = own_attributes(edge)
    return dict(edge.model_copy(update=dated).model_dump(mode="json"))


async def save_edge(driver: GraphDriver, fields: EdgeFields) -> None:
    from graphiti_core.edges import EntityEdge

    await EntityEdge(**fields).save(driver)


async def delete_edges(driver: GraphDriver, uuids: Sequence[str]) -> None:
    from graphiti_core.edges import EntityEdge

    if uuids:
        await EntityEdge.delete_by_uuids(driver, list(uuids))
