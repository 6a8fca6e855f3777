"""Another tool's graph given where relation records are expected: say what to run.

``relmerge run`` reads relation records. A GraphRAG output folder, a LightRAG working
folder or a GraphML graph read as records would only give a wall of rejected lines, so
they are recognised first and the error names the ``relmerge import`` command that
converts them.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from relmerge.errors import InputError

_GRAPHRAG_TABLES = ("relationships", "create_final_relationships")
_TABLE_SUFFIXES = (".parquet", ".csv")
_LIGHTRAG_GRAPH = "graph_chunk_entity_relation.graphml"


def _kind(path: Path) -> tuple[str, str] | None:
    """(what it is, import format) for another tool's graph, else None."""
    if path.is_dir():
        if (path / _LIGHTRAG_GRAPH).is_file():
            return "a LightRAG working folder", "lightrag"
        if any(
            (path / f"{stem}{suffix}").is_file()
            for stem in _GRAPHRAG_TABLES
            for suffix in _TABLE_SUFFIXES
        ):
            return "a GraphRAG output folder", "graphrag"
        return None
    if not path.is_file():
        return None
    suffix = path.suffix.lower()
    if suffix in _TABLE_SUFFIXES and path.stem in _GRAPHRAG_TABLES:
        return "a GraphRAG relationships table", "graphrag"
    if suffix == ".graphml":
        return "a GraphML graph", "lightrag"
    try:
        with path.open("rb") as handle:
            head = handle.read(512).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError:
        return None
    if head.startswith(b"<?xml") or head.startswith(b"<graphml"):
        return "an XML (GraphML) file", "lightrag"
    return None


def check_not_foreign(path: Path) -> None:
    """An :class:`InputError` naming ``relmerge import`` when ``path`` is another tool's
    graph rather than relation records."""
    kind = _kind(path)
    if kind is None:
        return
    what, fmt = kind
    source = path
    if path.name == _LIGHTRAG_GRAPH:  # its folder holds the chunk store import reads too
        source = path.parent
    work = source.parent / f"{source.stem if source.is_file() else source.name}-relmerge"
    raise InputError(
        f"{path} is {what}, not relation records: convert it first with "
        f"`relmerge import {fmt} {shlex.quote(str(source))} --output {shlex.quote(str(work))}`"
    )
