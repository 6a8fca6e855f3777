"""Edges written back through LightRAG: its edit call, or the graph alone, in batches.

LightRAG's edit call (``utils_graph.aedit_relation``, what ``rag.aedit_relation`` runs)
writes the graph, re-embeds the relation with the instance's own embedding function and
keeps the relation's chunk list, under LightRAG's keyed lock. It then persists every
storage it touched: on file storages that rewrites the whole graph and vector files for
each edge. :class:`EdgeWriter` runs the same edit call with the storages' persisting held
back until the end of a batch (:data:`BATCH` edges), so a pass persists once a batch and
LightRAG embeds a batch's relations together; the pass marks a batch's edges done in its
journal only once it is persisted. An instance with no embedding function at hand writes
the graph alone, under the same lock, and the changed edges' vectors are listed as stale.
"""

from __future__ import annotations

from typing import Any

from relmerge.integrations.lightrag.fields import EdgeFields

BATCH = 200  # edges written between two persists (and journal marks)


async def current_edge(rag: Any, source: str, target: str) -> dict[str, Any] | None:
    """The edge's data now, or None when it is gone."""
    graph = rag.chunk_entity_relation_graph
    if not await graph.has_edge(source, target):
        return None
    return dict(await graph.get_edge(source, target) or {})


class _Held:
    """A storage whose persisting (``index_done_callback``) waits for :meth:`persist`."""

    def __init__(self, storage: Any) -> None:
        self._storage = storage
        self._dirty = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)

    async def index_done_callback(self) -> None:
        self._dirty = True

    async def persist(self) -> None:
        if self._dirty:
            await self._storage.index_done_callback()
            self._dirty = False


class EdgeWriter:
    """Set edges' editable fields, re-embedding them when ``embed``; persisted by
    :meth:`persist` (call it before recording the edges as written)."""

    def __init__(self, rag: Any, embed: bool) -> None:
        self.rag = rag
        self.embed = embed
        self.graph = _Held(rag.chunk_entity_relation_graph)
        self.vectors = _Held(rag.relationships_vdb)
        self.chunks = _Held(rag.relation_chunks)
        self._checked = False

    async def write(self, source: str, target: str, fields: EdgeFields) -> None:
        from lightrag.kg.shared_storage import get_storage_keyed_lock

        if self.embed:
            if not self._checked:  # what rag.aedit_relation checks first
                await self.rag._raise_if_recovery_required()
                self._checked = True
            from lightrag.utils_graph import aedit_relation

            await aedit_relation(
                self.graph, self.rag.entities_vdb, self.vectors, source, target,
                dict(fields), self.chunks,
            )  # fmt: skip
            return
        workspace = self.rag.relationships_vdb.global_config.get("workspace", "")
        namespace = f"{workspace}:GraphDB" if workspace else "GraphDB"
        async with get_storage_keyed_lock(
            sorted([source, target]), namespace=namespace, enable_logging=False
        ):
            data = dict(await self.graph.get_edge(source, target) or {})
            await self.graph.upsert_edge(source, target, {**data, **fields})
            await self.graph.index_done_callback()

    async def persist(self) -> None:
        """Persist what the batch wrote: the graph, then the vectors and chunk lists."""
        await self.graph.persist()
        await self.vectors.persist()
        await self.chunks.persist()


def reembed_call(stale_file: str) -> str:
    """The Python that re-embeds the stale edges with the user's own LightRAG instance
    (an edit that changes nothing re-embeds the edge as it is)."""
    return (
        f"for source, target in json.load(open({stale_file!r})):\n"
        "    await rag.aedit_relation(source, target, {})"
    )
