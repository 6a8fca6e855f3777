"""LightRAG edges as relmerge records: one record per ``<SEP>`` fragment of an edge.

LightRAG (and nano-graphrag) keep one edge per entity pair, whose ``description`` joins the
description of every extraction of the pair with ``<SEP>`` and whose ``source_id`` joins
their chunk ids the same way. One record per fragment lets relmerge tell repeats and
paraphrases (to merge) from distinct facts (to keep). Each record cites all the edge's
chunks, since LightRAG keeps descriptions and chunks as unordered sets (which chunk said
what is unknown), and is named by the edge's whole ``keywords`` string (LightRAG's label of
the relation; "related" where there is none, as in nano-graphrag). A name shared by every
record of a block is no evidence for the decision kernel, so this labels the records
without merging them. The same conversion serves the folder import (``folder``) and the
pass through LightRAG's storage API (``passes``): both read edges and nodes as mappings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from relmerge.adapters.common import NO_LABEL, UNKNOWN_DOCUMENT, Imported, counted, md5_hex
from relmerge.progress import Progress

SEP = "<SEP>"


class EdgeLike(Protocol):
    """An edge as both readers give it: its node ids and its data (LightRAG's fields)."""

    @property
    def source(self) -> str: ...

    @property
    def target(self) -> str: ...

    @property
    def data(self) -> Mapping[str, Any]: ...


def strip_quotes(text: str) -> str:
    """nano-graphrag quotes names and descriptions (``"SCROOGE"``): read them without."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1].strip()
    return text


def split_field(value: object) -> list[str]:
    """The non-blank parts of a ``<SEP>``-joined field, in order."""
    text = value if isinstance(value, str) else "" if value is None else str(value)
    return [part for part in text.split(SEP) if part.strip()]


def entity_id(node_id: str) -> str:
    """LightRAG's own id of an entity (``ent-`` + md5 of the node id)."""
    return "ent-" + md5_hex(node_id)


def edge_id(source: str, target: str) -> str:
    """LightRAG's own id of a relation vector (``rel-`` + md5 of both node ids)."""
    return "rel-" + md5_hex(source + target)


def edge_records(
    edges: Sequence[EdgeLike],
    nodes: Mapping[str, Mapping[str, Any]],
    documents: Mapping[str, str],
    progress: Progress,
    format_name: str = "lightrag",
) -> tuple[Imported, dict[str, str]]:
    """Records (one per ``<SEP>`` description of each edge, ``origins`` the edge's index)
    and the raw text of each, plus the nodes as entities (phase ``import_edges``).
    ``documents`` maps a chunk id to its document id, where known."""
    relations: list[dict[str, Any]] = []
    origins: dict[str, int] = {}
    raws: dict[str, str] = {}
    multi = 0
    progress.start("import_edges", len(edges))
    for number, edge in counted(enumerate(edges), progress, "import_edges"):
        fragments = split_field(edge.data.get("description", "")) or [""]
        multi += len(fragments) > 1
        chunks = [part.strip() for part in split_field(edge.data.get("source_id", ""))]
        chunk = chunks[0] if chunks else None
        label = strip_quotes(str(edge.data.get("keywords") or "")) or NO_LABEL
        base = edge_id(edge.source, edge.target)
        for index, raw in enumerate(fragments):
            rid = f"{base}-{index}-{md5_hex(raw)[:8]}"
            if rid in origins:  # two edges whose joined endpoint ids collide ("AB"+"C")
                rid = f"{rid}-e{number}"
            relations.append(
                {
                    "relation_id": rid,
                    "chunk_id": chunk,
                    "document_id": documents.get(chunk, UNKNOWN_DOCUMENT) if chunk else None,
                    "source_entity_id": entity_id(edge.source),
                    "target_entity_id": entity_id(edge.target),
                    "source_entity_name": strip_quotes(edge.source),
                    "target_entity_name": strip_quotes(edge.target),
                    "type": NO_LABEL,
                    "name": label,
                    "description": strip_quotes(raw),
                    "attributes": {},
                    "source_chunk_ids": chunks,
                }
            )
            origins[rid] = number
            raws[rid] = raw
    entities = [
        {
            "entity_id": entity_id(node),
            "name": strip_quotes(node),
            "type": strip_quotes(str(data.get("entity_type") or "")) or None,
            "profile": " ".join(
                strip_quotes(part) for part in split_field(data.get("description", ""))
            )
            or None,
        }
        for node, data in nodes.items()
        if strip_quotes(node)
    ]
    progress.finish("import_edges")
    counts = {"edges": len(edges), "edges_with_several_descriptions": multi}
    return Imported(format_name, relations, entities, origins, counts), raws
