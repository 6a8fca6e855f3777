"""Edges and nodes read through LightRAG's storage API, whatever storage it runs on.

All edges (``get_all_edges``), or only those that given documents contributed: LightRAG
keeps, per document, the entity pairs its extraction produced (``full_relations``), so a
pass after an insert reads those edges alone (``get_edges_batch``) and its cost follows
the insert, not the graph. A document LightRAG has not processed yet (queued, or being
processed by another process) contributed no edge yet: it is waited for, or reported.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from relmerge.integrations.lightrag.records import split_field

_ENDPOINT_KEYS = ("source", "target", "src_id", "tgt_id")
_POLL_SECONDS = 0.5


@dataclass(frozen=True)
class GraphEdge:
    """One LightRAG edge: its node ids (sorted, as LightRAG keys an undirected edge) and
    its data."""

    source: str
    target: str
    data: Mapping[str, Any]


@dataclass
class Documents:
    """The documents a pass was asked about, by what LightRAG says of them."""

    processed: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)  # queued or being processed
    failed: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # no doc status at all


def _status(value: Any) -> str:
    """A doc status as a word: an enum from JSON storages, a string from PostgreSQL."""
    status = getattr(value, "status", None)
    if status is None and isinstance(value, Mapping):
        status = value.get("status")
    return str(getattr(status, "value", status) or "").lower()


async def track_documents(rag: Any, track_id: str) -> list[str]:
    """The documents of one ``ainsert`` (the track id it returned)."""
    found = await rag.aget_docs_by_track_id(track_id)
    return sorted(found or {})


async def document_states(rag: Any, ids: Sequence[str], wait_seconds: float) -> Documents:
    """Where each document stands, waiting up to ``wait_seconds`` for those not processed."""
    deadline = time.monotonic() + max(0.0, wait_seconds)
    while True:
        rows = await rag.doc_status.get_by_ids(list(ids))
        states = Documents()
        for doc_id, row in zip(ids, rows, strict=False):
            word = _status(row) if row is not None else ""
            if row is None:
                states.unknown.append(doc_id)
            elif word == "processed":
                states.processed.append(doc_id)
            elif word == "failed":
                states.failed.append(doc_id)
            else:
                states.waiting.append(doc_id)
        if not states.waiting or time.monotonic() >= deadline:
            return states
        await asyncio.sleep(_POLL_SECONDS)


async def document_pairs(rag: Any, ids: Iterable[str]) -> list[tuple[str, str]]:
    """The sorted entity pairs the documents' extraction produced."""
    pairs: set[tuple[str, str]] = set()
    for doc_id in ids:
        row = await rag.full_relations.get_by_id(doc_id)
        for pair in (row or {}).get("relation_pairs") or []:
            if isinstance(pair, list | tuple) and len(pair) == 2:
                first, second = sorted((str(pair[0]), str(pair[1])))
                pairs.add((first, second))
    return sorted(pairs)


def _edge(source: str, target: str, data: Mapping[str, Any]) -> GraphEdge:
    first, second = sorted((source, target))
    kept = {key: value for key, value in data.items() if key not in _ENDPOINT_KEYS}
    return GraphEdge(first, second, kept)


async def read_edges(rag: Any, pairs: Sequence[tuple[str, str]] | None) -> list[GraphEdge]:
    """The edges of ``pairs`` (those that exist), or every edge of the graph, each once."""
    graph = rag.chunk_entity_relation_graph
    edges: dict[tuple[str, str], GraphEdge] = {}
    if pairs is None:
        for row in await graph.get_all_edges():
            edge = _edge(str(row.get("source")), str(row.get("target")), row)
            edges.setdefault((edge.source, edge.target), edge)
    else:
        found = await graph.get_edges_batch([{"src": a, "tgt": b} for a, b in pairs])
        for (source, target), data in found.items():
            edge = _edge(str(source), str(target), data or {})
            edges.setdefault((edge.source, edge.target), edge)
    return [edges[key] for key in sorted(edges)]


async def read_nodes(rag: Any, edges: Sequence[GraphEdge]) -> dict[str, dict[str, Any]]:
    """The nodes at the ends of ``edges`` (their summaries are the entity profiles)."""
    ids = sorted({node for edge in edges for node in (edge.source, edge.target)})
    if not ids:
        return {}
    found = await rag.chunk_entity_relation_graph.get_nodes_batch(ids)
    return {str(node): dict(data or {}) for node, data in found.items()}


async def chunk_documents(rag: Any, edges: Sequence[GraphEdge]) -> dict[str, str]:
    """Chunk id -> document id for the first chunk of each edge (the record's chunk)."""
    chunks = sorted(
        {parts[0].strip() for e in edges if (parts := split_field(e.data.get("source_id")))}
    )
    if not chunks:
        return {}
    rows = await rag.text_chunks.get_by_ids(chunks)
    return {
        chunk: str(row["full_doc_id"])
        for chunk, row in zip(chunks, rows, strict=False)
        if isinstance(row, Mapping) and isinstance(row.get("full_doc_id"), str)
    }


def fragments(edge: GraphEdge) -> int:
    return len(split_field(edge.data.get("description"))) or 1
