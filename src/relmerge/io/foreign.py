"""Another tool's graph given where relation records are expected: say what to run.

``relmerge run`` reads relation records. A GraphRAG output folder, a LightRAG working
folder, a GraphML graph or a CSV / TSV table read as records would only give a wall of
rejected lines ("malformed JSON"), so they are recognised first and the error says what
the file is and what to do: the ``relmerge import`` command that converts it, or the JSONL
form relmerge reads.
"""

from __future__ import annotations

import csv
import io
import shlex
from pathlib import Path

from relmerge.errors import InputError
from relmerge.model import ExtractedRelation

_GRAPHRAG_TABLES = ("relationships", "create_final_relationships")
_TABLE_SUFFIXES = (".parquet", ".csv")
_LIGHTRAG_GRAPH = "graph_chunk_entity_relation.graphml"
_UTF8_BOM = b"\xef\xbb\xbf"
_HEAD_BYTES = 65536  # enough for a header row and the row after it
_DELIMITERS = {",": "CSV", "\t": "TSV", ";": "CSV"}
_TABLE_NAMES = {".csv": ",", ".tsv": "\t", ".tab": "\t"}
# The columns of a GraphRAG relationships table that ``relmerge import graphrag`` reads.
_GRAPHRAG_COLUMNS = {"source", "target", "description"}


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
    head = _head(path)
    if head.startswith(b"<?xml") or head.startswith(b"<graphml"):
        return "an XML (GraphML) file", "lightrag"
    return None


def _head(path: Path) -> bytes:
    """The file's first bytes, without a byte order mark or leading blank space."""
    try:
        with path.open("rb") as handle:
            return handle.read(_HEAD_BYTES).removeprefix(_UTF8_BOM).lstrip(b" \t\r\n")
    except OSError:
        return b""


def _table_rows(path: Path) -> tuple[str, list[str]] | None:
    """(delimiter, header) when the file is a CSV or TSV table rather than JSON lines.

    JSON lines start with ``{`` (or ``[``); a table starts with a header row. A ``.csv`` /
    ``.tsv`` name is enough with a header of one column or more; any other name needs
    a header of two columns or more and a next row of as many (a stray first line of a
    JSONL file is not taken for a table).
    """
    head = _head(path)
    if not head or head[:1] in b"{[":
        return None
    text = head.decode("utf-8", errors="replace")
    named = _TABLE_NAMES.get(path.suffix.lower())
    first_line = text.split("\n", 1)[0]
    delimiter = max(_DELIMITERS, key=first_line.count)  # Excel writes ";" in some locales
    if named is not None and delimiter not in first_line:
        delimiter = named
    try:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
        rows = [row for _, row in zip(range(2), reader, strict=False)]
    except csv.Error:
        return None
    header = [cell.strip() for cell in rows[0]] if rows else []
    if named is not None:
        return (delimiter, header) if header else None
    if len(header) < 2 or len(rows) < 2 or len(rows[1]) != len(header):
        return None
    return delimiter, header


def check_not_table(path: Path) -> None:
    """An :class:`InputError` saying what to do when ``path`` is a CSV or TSV table."""
    table = _table_rows(path) if path.is_file() else None
    if table is None:
        return
    delimiter, header = table
    kind = _DELIMITERS.get(delimiter, "CSV")
    columns = {column.lower() for column in header}
    if columns >= _GRAPHRAG_COLUMNS and delimiter == "," and path.suffix.lower() == ".csv":
        work = path.parent / f"{path.stem}-relmerge"
        raise InputError(
            f"{path} is a CSV table with the columns of a GraphRAG relationships table "
            f"({', '.join(header[:8])}), not relation records: convert it first with "
            f"`relmerge import graphrag {shlex.quote(str(path))} "
            f"--output {shlex.quote(str(work))}`"
        )
    shown = ", ".join(header[:6]) + (", …" if len(header) > 6 else "")
    fields = list(ExtractedRelation.model_fields)
    graphrag = (
        ", or, if it is a GraphRAG relationships table, run `relmerge import graphrag` on it"
        if kind == "CSV"
        else ""
    )
    raise InputError(
        f"{path} looks like a {kind} table (header: {shown}), not relation records: "
        f"relmerge reads JSONL, one JSON object per line with the {len(fields)} fields of "
        f"ExtractedRelation ({', '.join(fields)}; attributes an object of strings, "
        f"source_chunk_ids an array of strings): convert the table to that{graphrag}"
    )


def check_not_foreign(path: Path) -> None:
    """An :class:`InputError` naming ``relmerge import`` when ``path`` is another tool's
    graph rather than relation records, or saying what to do with a CSV / TSV table."""
    kind = _kind(path)
    if kind is None:
        check_not_table(path)
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


_READS = {
    "graphrag": "a GraphRAG output folder or relationships table",
    "lightrag": "a LightRAG working folder or GraphML graph",
}


def check_import_format(fmt: str, source: Path, output: Path) -> None:
    """An :class:`InputError` naming the other ``relmerge import`` format when ``source``
    is that tool's graph and not ``fmt``'s (a LightRAG folder given to ``import graphrag``
    would only get "no relationships.parquet")."""
    kind = _kind(source)
    target = source.parent if source.name == _LIGHTRAG_GRAPH else source
    if kind is None and fmt == "lightrag" and source.suffix.lower() in _TABLE_SUFFIXES:
        kind = "a table", "graphrag"
        if source.is_file() and _kind(source.parent) is not None:
            kind, target = ("a table of a GraphRAG output folder", "graphrag"), source.parent
    if kind is None or kind[1] == fmt or (source.is_dir() and _has_both(source)):
        return
    what, other = kind
    raise InputError(
        f"{source} is {what}, not {_READS[fmt]}: run "
        f"`relmerge import {other} {shlex.quote(str(target))} --output {shlex.quote(str(output))}`"
    )


def _has_both(folder: Path) -> bool:
    """A folder holding a LightRAG graph and a GraphRAG relationships table: either
    format may be meant."""
    return (folder / _LIGHTRAG_GRAPH).is_file() and any(
        (folder / f"{stem}{suffix}").is_file()
        for stem in _GRAPHRAG_TABLES
        for suffix in _TABLE_SUFFIXES
    )
