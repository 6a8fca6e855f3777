"""LightRAG / nano-graphrag working folders read and written as files, offline.

For what LightRAG's storage API cannot do without a running LightRAG: reading a folder
someone sent you, with no embedding function at hand (``relmerge import lightrag`` /
``export lightrag``). A LightRAG you can start is deduplicated through its own API instead
(``passes``). Both keep the graph in ``graph_chunk_entity_relation.graphml`` (networkx,
undirected); import turns each edge into records as ``records`` says. Export: the same
graph, nodes unchanged, each edge holding the distinct facts the run kept, joined by
``<SEP>``; an edge the run did not change is written back as it was; the relation stores
beside the graph are made to agree with it (``folder_stores``), and the vectors of changed
edges are listed as stale. Entity ids are LightRAG's own (``ent-`` + md5 of the node id).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from relmerge.adapters.common import (
    EXPORT_FILE,
    Imported,
    Piece,
    copy_others,
    counted,
    layout,
    ordered_union,
    other_files,
    read_run,
    write_atomic,
)
from relmerge.adapters.graphml import Edge, GraphmlDocument, read_graphml
from relmerge.adapters.staging import check_destination, staged_folder
from relmerge.errors import InputError
from relmerge.integrations.lightrag.folder_stores import (
    EdgeChanges,
    pair_of,
    rebuild_hint,
    update_stores,
)
from relmerge.integrations.lightrag.records import (
    SEP,
    edge_records,
    entity_id,
    split_field,
    strip_quotes,
)
from relmerge.integrations.lightrag.rewrite import fragment
from relmerge.progress import Progress, as_progress

GRAPH_FILE = "graph_chunk_entity_relation.graphml"
CHUNKS_FILE = "kv_store_text_chunks.json"
__all__ = [
    "GRAPH_FILE",
    "SEP",
    "entity_id",
    "export_lightrag",
    "import_lightrag",
    "split_field",
    "strip_quotes",
]


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
    """Records of the document's edges and the raw text of each (``records``)."""
    return edge_records(document.edges, document.nodes, documents, progress)


def import_lightrag(source: Path, progress: Progress | None = None) -> Imported:
    """Relation records and entities of a LightRAG / nano-graphrag working folder.
    Progress: phases ``graph`` and ``import_edges``."""
    progress = as_progress(progress)
    graph, folder = locate(source)
    return _convert(_read(graph, progress), _documents(folder), progress)[0]


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
    document.set_edge_data(edge, "description", SEP.join(fragment(p, raws) for p in pieces))
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
