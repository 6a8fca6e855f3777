"""Edges written back through LightRAG: its edit call, or the graph alone.

``aedit_relation`` writes the graph, re-embeds the relation with the instance's own
embedding function and keeps the relation's chunk list, under LightRAG's keyed lock. An
instance with no embedding function at hand (the command line on a working folder with no
configuration) writes the graph under the same lock, and the vectors of the edges it
changed are listed as stale, with the call that re-embeds them.
"""

from __future__ import annotations

from typing import Any

from relmerge.integrations.lightrag.fields import EdgeFields


async def current_edge(rag: Any, source: str, target: str) -> dict[str, Any] | None:
    """The edge's data now, or None when it is gone."""
    graph = rag.chunk_entity_relation_graph
    if not await graph.has_edge(source, target):
        return None
    return dict(await graph.get_edge(source, target) or {})


async def write_edge(rag: Any, source: str, target: str, fields: EdgeFields, embed: bool) -> None:
    """Set the edge's editable fields, re-embedding it when ``embed``."""
    if embed:
        await rag.aedit_relation(source, target, dict(fields))
        return
    from lightrag.kg.shared_storage import get_storage_keyed_lock

    graph = rag.chunk_entity_relation_graph
    workspace = rag.relationships_vdb.global_config.get("workspace", "")
    namespace = f"{workspace}:GraphDB" if workspace else "GraphDB"
    async with get_storage_keyed_lock(
        sorted([source, target]), namespace=namespace, enable_logging=False
    ):
        data = dict(await graph.get_edge(source, target) or {})
        await graph.upsert_edge(source, target, {**data, **fields})


async def finish(rag: Any, embed: bool) -> None:
    """Persist what ``write_edge`` wrote without the edit call (the edit call persists
    each edge itself)."""
    if not embed:
        await rag.chunk_entity_relation_graph.index_done_callback()


def reembed_call(stale_file: str) -> str:
    """The Python that re-embeds the stale edges with the user's own LightRAG instance
    (an edit that changes nothing re-embeds the edge as it is)."""
    return (
        f"for source, target in json.load(open({stale_file!r})):\n"
        "    await rag.aedit_relation(source, target, {})"
    )
