"""LightRAG / nano-graphrag working folders to relmerge input, and deduplicated results back.

Both keep the graph in ``graph_chunk_entity_relation.graphml`` (networkx, undirected): one
edge per entity pair, whose ``description`` joins the descriptions of every extraction of
the pair with ``<SEP>`` (nano-graphrag keeps repeats, LightRAG a sorted set) and whose
``source_id`` joins their chunk ids the same way. Import: one record per description, so
relmerge can tell repeats and paraphrases (to merge) from distinct facts (to keep); each
record cites all the edge's chunks, since the merge kept descriptions and chunks as
unordered sets (which chunk said what is unknown), and is named by the edge's whole
``keywords`` string (LightRAG's label of the relation; "related" where there is none, as
in nano-graphrag). A name shared by every record of a block is no evidence for the
decision kernel, so this labels the records without merging them. Export: the same
graph, nodes unchanged, each edge holding the distinct facts the run kept, joined by
``<SEP>``; an edge the run did not change is written back as it was; the relation
stores beside the graph are made to agree with it (``adapters.lightrag_stores``). Names
and descriptions quoted by nano-graphrag (``"SCROOGE"``) are read without their quotes;
entity ids are LightRAG's own (``ent-`` + md5 of the node id).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from relmerge.adapters.common import (
    EXPORT_FILE,
    NO_LABEL,
    UNKNOWN_DOCUMENT,
    Imported,
    Piece,
    copy_others,
    counted,
    layout,
    md5_hex,
    ordered_union,
    other_files,
    read_run,
    write_atomic,
)
from relmerge.adapters.graphml import Edge, GraphmlDocument, read_graphml
from relmerge.adapters.lightrag_stores import EdgeChanges, pair_of, rebuild_hint, update_stores
from relmerge.adapters.staging import check_destination, staged_folder
from relmerge.errors import InputError
from relmerge.progress import Progress, as_progress

GRAPH_FILE = "graph_chunk_entity_relation.graphml"
CHUNKS_FILE = "kv_store_text_chunks.json"
SEP = "<SEP>"


def strip_quotes(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1].strip()
    return text


def split_field(value: str) -> list[str]:
    """The non-blank parts of a ``<SEP>``-joined field, in order."""
    return [part for part in value.split(SEP) if part.strip()]


def entity_id(node_id: str) -> str:
    return "ent-" + md5_hex(node_id)


def locate(source: Path) -> tuple[Path, Path | None]:
    """The GraphML file and the working folder (None when SRC is the file alone)."""
    if source.is_dir():
        graph = source / GRAPH_FILE
        if not graph.is_file():
            raise InputError(f"no {GRAPH_FILE} in {source}")
        return graph, source
    if source.is_file():
        return source, None
    raise InputError(f"LightRAG working folder not found: {source}")


def _documents(folder: Path | None) -> dict[str, str]:
    """Chunk id -> document id from the chunk store, when the folder has one."""
    path = None if folder is None else folder / CHUNKS_FILE
    if path is None or not path.is_file():
        return {}
    try:
        chunks = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as error:
        raise InputError(f"cannot read {path}: {error}") from None
    if not isinstance(chunks, dict):
        return {}
    return {
        str(chunk): str(value["full_doc_id"])
        for chunk, value in chunks.items()
        if isinstance(value, dict) and isinstance(value.get("full_doc_id"), str)
    }


def _read(graph: Path, progress: Progress) -> GraphmlDocument:
    """The GraphML document (phase ``graph``, in bytes)."""
    progress.start("graph", graph.stat().st_size if graph.is_file() else None)
    document = read_graphml(graph, lambda n: progress.advance("graph", n))
    progress.finish("graph")
    return document


def _convert(
    document: GraphmlDocument, documents: dict[str, str], progress: Progress
) -> tuple[Imported, dict[str, str]]:
    """Records (one per ``<SEP>`` description of each edge) and the raw text of each
    (phase ``import_edges``)."""
    relations: list[dict[str, Any]] = []
    origins: dict[str, int] = {}
    raws: dict[str, str] = {}
    multi = 0
    progress.start("import_edges", len(document.edges))
    for number, edge in counted(enumerate(document.edges), progress, "import_edges"):
        fragments = split_field(edge.data.get("description", "")) or [""]
        multi += len(fragments) > 1
        chunks = [part.strip() for part in split_field(edge.data.get("source_id", ""))]
        chunk = chunks[0] if chunks else None
        label = strip_quotes(edge.data.get("keywords", "")) or NO_LABEL
        edge_id = "rel-" + md5_hex(edge.source + edge.target)
        for index, raw in enumerate(fragments):
            rid = f"{edge_id}-{index}-{md5_hex(raw)[:8]}"
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
            "type": strip_quotes(data.get("entity_type", "")) or None,
            "profile": " ".join(
                strip_quotes(part) for part in split_field(data.get("description", ""))
            )
            or None,
        }
        for node, data in document.nodes.items()
        if strip_quotes(node)
    ]
    progress.finish("import_edges")
    counts = {"edges": len(document.edges), "edges_with_several_descriptions": multi}
    return Imported("lightrag", relations, entities, origins, counts), raws


def import_lightrag(source: Path, progress: Progress | None = None) -> Imported:
    """Relation records and entities of a LightRAG / nano-graphrag working folder.
    Progress: phases ``graph`` and ``import_edges``."""
    progress = as_progress(progress)
    graph, folder = locate(source)
    return _convert(_read(graph, progress), _documents(folder), progress)[0]


def _fragment(piece: Piece, raws: dict[str, str]) -> str:
    """A piece's text in the edge description: as it was, or the merged description
    (quoted like its first member was, and never holding the separator)."""
    if piece.unchanged or piece.output is None:
        return raws[piece.relation_id]
    text = piece.output.description.replace(SEP, " ")
    first = raws[piece.members[0]].strip()
    return f'"{text}"' if len(first) >= 2 and first[0] == first[-1] == '"' else text


def _weight(values: Sequence[str]) -> str | None:
    numbers = []
    for value in values:
        try:
            numbers.append(float(value))
        except ValueError:
            continue
    return str(sum(numbers)) if numbers else None


def _rebuild(
    document: GraphmlDocument,
    edge: Edge,
    pieces: Sequence[Piece],
    contributing: Sequence[dict[str, str]],
    raws: dict[str, str],
) -> None:
    """Set the edge's description to its pieces; chunks and weight of all contributing edges."""
    document.set_edge_data(edge, "description", SEP.join(_fragment(p, raws) for p in pieces))
    if len(contributing) < 2:
        return  # its own records only: source_id and weight stay the edge's
    for name in ("source_id", "file_path"):
        if any(name in data for data in contributing):
            parts = ordered_union(split_field(data.get(name, "")) for data in contributing)
            document.set_edge_data(edge, name, SEP.join(parts))
    weight = _weight([data["weight"] for data in contributing if "weight" in data])
    if weight is not None:
        document.set_edge_data(edge, "weight", weight)
    keywords = sorted(
        {
            word.strip()
            for data in contributing
            for word in data.get("keywords", "").split(",")
            if word.strip()
        }
    )
    if keywords:  # LightRAG joins the keywords of merged edges so
        document.set_edge_data(edge, "keywords", ",".join(keywords))


def export_lightrag(
    out: Path,
    original: Path,
    target: Path,
    *,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Write the original working folder with the run's deduplicated edges to TARGET
    (whole or not at all: see ``adapters.staging``). Progress: phases ``graph`` and
    ``import_edges`` (the original read again), ``run``, ``export_edges`` and ``files``."""
    progress = as_progress(progress)
    graph, folder = locate(original)
    check_destination(target, overwrite, folder or graph, out)
    document = _read(graph, progress)
    imported, raws = _convert(document, _documents(folder), progress)
    units = layout(imported, read_run(out, progress))
    before = [dict(edge.data) for edge in document.edges]
    own: dict[int, set[str]] = {}
    for rid, number in imported.origins.items():
        own.setdefault(number, set()).add(rid)
    changes = EdgeChanges()
    fragments_after = 0
    progress.start("export_edges", len(document.edges))
    for number, edge in counted(enumerate(document.edges), progress, "export_edges"):
        pieces = units.get(number, [])
        if not pieces:
            continue
        fragments_after += len(pieces)
        covered = [m for piece in pieces for m in (piece.members or (piece.relation_id,))]
        if all(piece.unchanged for piece in pieces) and set(covered) == own[number]:
            continue
        edges = ordered_union([[imported.origins[m] for m in covered]])
        _rebuild(document, edge, pieces, [before[e] for e in edges], raws)
        kept = pair_of(edge.source, edge.target)
        changes.rewritten.append(kept)
        for other in edges:
            gone = document.edges[other]
            if other != number and not units.get(other):
                changes.removed[pair_of(gone.source, gone.target)] = kept
                changes.absorbed.setdefault(kept, []).append(pair_of(gone.source, gone.target))
    removed = 0
    for number, edge in enumerate(document.edges):
        if not units.get(number):
            document.remove_edge(edge)  # every record merged into another edge's relation
            removed += 1
    progress.finish("export_edges")
    progress.start("files", len(other_files(folder, [graph.name])) + 2)
    with staged_folder(target) as stage:
        copied = copy_others(folder, stage, [graph.name], lambda: progress.advance("files"))
        document.write(stage / graph.name)
        progress.advance("files")
        # the stores were copied (counted): those that change are written again
        stores = update_stores(folder, stage, changes) if folder is not None else None
        summary: dict[str, Any] = {
            "format": "lightrag",
            "original": str(original),
            "run": str(out),
            "edges_before": len(before),
            "edges_after": len(before) - removed,
            "edges_rewritten": len(changes.rewritten),
            "edges_removed": removed,
            "descriptions_before": len(imported.relations),
            "descriptions_after": fragments_after,
            "copied_files": len(copied),
            "stores_updated": stores.updated if stores else [],
            "stale": stores.stale if stores else {},
        }
        if summary["stale"]:
            summary["rebuild"] = rebuild_hint(target, summary["stale"])
        write_atomic(stage / EXPORT_FILE, orjson.dumps(summary, option=orjson.OPT_INDENT_2))
        progress.advance("files")
    progress.finish("files")
    return summary
