"""Microsoft GraphRAG output folders to relmerge input, and deduplicated results back.

GraphRAG writes one relationships row per (source, target) pair, with every extraction
of the pair already merged and summarised. What is left to deduplicate are reversed
pairs (A→B and B→A) and, with an ``--entity-mapping``, relations of alias entities.

Import: one record per distinct row, GraphRAG's row id as relation id, its
``text_unit_ids`` as chunk ids, the endpoints' ids from the entities table (by title, or
``name`` in 0.x) and the document from the text units table when present. Every
generation is read: ``relationships`` (1.x+) and ``create_final_relationships`` (0.x),
as Parquet or as CSV (3.x ``output.type: csv``). GraphRAG 0.1 wrote each row several
times with the same id: such repeats are one record (their weight counted once).

Export: the folder copied, the relationships table with one row per output relation
(rows the run did not change, and the rows it rejected, exactly as they were; a merged
row is its representative's row — same ``id`` and ``human_readable_id`` — with the merged
description, summed weight and all text units), ``relationship_ids`` lists of other
tables pointed at the kept rows, and citations of merged-away rows in the community
reports (``Relationships (12, 45, +more)``) rewritten to the kept rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from relmerge.adapters.citations import CitationRewriter
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
from relmerge.adapters.staging import check_destination, staged_folder
from relmerge.adapters.tables import (
    SUFFIXES,
    Format,
    Row,
    Table,
    read_table,
    table_columns,
    table_format,
)
from relmerge.errors import InputError
from relmerge.progress import Progress, as_progress

RELATIONSHIPS = ("relationships", "create_final_relationships")
ENTITIES = ("entities", "create_final_entities")
TEXT_UNITS = ("text_units", "create_final_text_units")
REPORTS = ("community_reports", "create_final_community_reports")
REPORT_COLUMNS = ("full_content", "summary", "findings", "full_content_json")
_REQUIRED = ("source", "target", "description", "text_unit_ids")
_EXTENSIONS: dict[Format, str] = {kind: suffix for suffix, kind in SUFFIXES.items()}


@dataclass(frozen=True)
class GraphragFolder:
    relationships: Path
    format: Format
    entities: Path | None
    text_units: Path | None

    @property
    def folder(self) -> Path:
        return self.relationships.parent


def _table_path(folder: Path, stems: Sequence[str], kind: Format) -> Path | None:
    return next(
        (
            folder / f"{stem}{_EXTENSIONS[kind]}"
            for stem in stems
            if (folder / f"{stem}{_EXTENSIONS[kind]}").is_file()
        ),
        None,
    )


def locate(source: Path) -> GraphragFolder:
    """SRC is a GraphRAG output folder or its relationships table (Parquet or CSV).

    A folder is read in Parquet when it has a Parquet relationships table, else in CSV;
    the other tables are read in the same format.
    """
    kind: Format | None
    if source.is_file():
        kind = table_format(source)
        if kind is None:
            raise InputError(f"{source} is not a GraphRAG table (.parquet or .csv)")
        relationships: Path | None = source
    elif source.is_dir():
        relationships = None
        formats: tuple[Format, ...] = ("parquet", "csv")
        for candidate in formats:
            kind, relationships = candidate, _table_path(source, RELATIONSHIPS, candidate)
            if relationships is not None:
                break
        if relationships is None or kind is None:
            names = " or ".join(f"{stem}.parquet/.csv" for stem in RELATIONSHIPS)
            raise InputError(f"no {names} in {source}")
    else:
        raise InputError(f"GraphRAG output not found: {source}")
    assert relationships is not None
    folder = relationships.parent
    return GraphragFolder(
        relationships,
        kind,
        _table_path(folder, ENTITIES, kind),
        _table_path(folder, TEXT_UNITS, kind),
    )


def _text(table: Table, row: Row, column: str) -> str | None:
    value = table.text(row, column)
    return value.strip() if value is not None and value.strip() else None


def synthetic_entity_id(title: str) -> str:
    """An id for an endpoint missing from the entities table (GraphRAG's test data has some)."""
    return "entity-" + md5_hex(title)[:16]


def _entities(folder: GraphragFolder) -> list[dict[str, Any]]:
    if folder.entities is None:
        return []
    table = read_table(folder.entities, ["id", "title", "name", "type", "description"])
    title_column = "title" if "title" in table.columns else "name"
    entities, seen = [], set()
    for row in table.rows:
        title = _text(table, row, title_column)
        if title is None or title in seen:
            continue
        seen.add(title)
        entities.append(
            {
                "entity_id": _text(table, row, "id") or synthetic_entity_id(title),
                "name": title,
                "type": _text(table, row, "type"),
                "profile": _text(table, row, "description"),
            }
        )
    return entities


def _documents(folder: GraphragFolder) -> dict[str, str]:
    """Text unit id -> document id (``document_id``, or the first of ``document_ids``)."""
    if folder.text_units is None:
        return {}
    table = read_table(folder.text_units, ["id", "document_id", "document_ids"])
    documents = {}
    for row in table.rows:
        document = _text(table, row, "document_id")
        if document is None:
            document = next(iter(table.items(row, "document_ids") or []), None)
        unit = _text(table, row, "id")
        if unit is not None and document:
            documents[unit] = document.strip()
    return documents


@dataclass
class RowIds:
    """The relation id of each distinct row, and the rows that repeat an earlier one."""

    ids: list[str | None]  # per row: its relation id, None for a repeat
    repeat_of: dict[int, int] = field(default_factory=dict)  # repeated row -> first row


def _signature(row: Row) -> bytes:
    return orjson.dumps(row, option=orjson.OPT_SORT_KEYS, default=str)


def row_ids(table: Table) -> RowIds:
    """GraphRAG's row id when it has one, else an id derived from the row's content.

    A row with the id and content of an earlier row is a repeat (GraphRAG 0.1 wrote each
    row several times): it is no record of its own. A row reusing an id with other
    content gets an id derived from its content.
    """
    result = RowIds([])
    first: dict[str, int] = {}
    for number, row in enumerate(table.rows):
        rid = _text(table, row, "id")
        if rid is not None and rid in first:
            earlier = first[rid]
            if _signature(table.rows[earlier]) == _signature(row):
                result.ids.append(None)
                result.repeat_of[number] = earlier
                continue
            rid = None
        if rid is None:
            content = "\n".join(str(row.get(k)) for k in ("source", "target", "description"))
            rid = f"graphrag-{number}-{md5_hex(content)[:12]}"
        first.setdefault(rid, number)
        result.ids.append(rid)
    return result


def _relationships_table(folder: GraphragFolder) -> Table:
    table = read_table(folder.relationships)
    missing = [name for name in _REQUIRED if name not in table.columns]
    if missing:
        raise InputError(
            f"{folder.relationships} has no column(s) {', '.join(missing)}: "
            "not a GraphRAG relationships table"
        )
    return table


class _Tables(NamedTuple):
    """What an import reads: the relationships table (whole: an export writes it back),
    the entities, the documents of text units; and where progress goes."""

    relationships: Table
    entities: list[dict[str, Any]]
    documents: dict[str, str]
    progress: Progress


def _read_tables(folder: GraphragFolder, progress: Progress) -> _Tables:
    """The folder's tables, read one after the other (phase ``tables``)."""
    progress.start("tables", 1 + (folder.entities is not None) + (folder.text_units is not None))
    table = _relationships_table(folder)
    progress.advance("tables")
    entities = _entities(folder)
    progress.advance("tables", folder.entities is not None)
    documents = _documents(folder)
    progress.advance("tables", folder.text_units is not None)
    progress.finish("tables")
    return _Tables(table, entities, documents, progress)


def import_graphrag(source: Path, progress: Progress | None = None) -> Imported:
    """Relation records (one per distinct relationships row) and entities of a GraphRAG
    output. Progress: phases ``tables`` and ``import_rows``."""
    folder = locate(source)
    return _import(folder, _read_tables(folder, as_progress(progress)))[0]


def _import(folder: GraphragFolder, tables: _Tables) -> tuple[Imported, RowIds]:
    table, entities, documents, progress = tables
    progress.start("import_rows", len(table.rows))
    ids = row_ids(table)
    entity_ids = {entity["name"]: entity["entity_id"] for entity in entities}
    relations: list[dict[str, Any]] = []
    origins: dict[str, int] = {}
    synthesized: set[str] = set()
    rows = counted(enumerate(zip(ids.ids, table.rows, strict=True)), progress, "import_rows")
    for number, (rid, row) in rows:
        if rid is None:
            continue
        names = [_text(table, row, "source"), _text(table, row, "target")]
        ends = []
        for name in names:
            if name is not None and name not in entity_ids:
                synthesized.add(name)
            ends.append(None if name is None else entity_ids.get(name, synthetic_entity_id(name)))
        units = table.items(row, "text_unit_ids")
        chunk = units[0] if units else None
        relations.append(
            {
                "relation_id": rid,
                "chunk_id": chunk,
                "document_id": documents.get(chunk, UNKNOWN_DOCUMENT) if chunk else None,
                "source_entity_id": ends[0],
                "target_entity_id": ends[1],
                "source_entity_name": names[0],
                "target_entity_name": names[1],
                "type": NO_LABEL,
                "name": NO_LABEL,
                "description": table.text(row, "description"),
                "attributes": {},
                "source_chunk_ids": units,
            }
        )
        origins[rid] = number
    progress.finish("import_rows")
    counts = {
        "relationships": len(relations),
        "repeated_rows": len(ids.repeat_of),
        "endpoints_missing_from_entities": len(synthesized),
        "table_format": folder.format,
    }
    return Imported("graphrag", relations, entities, origins, counts), ids


# -- export ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Emitted:
    """One row of the exported relationships table: the row of ``base`` (a row number of
    the original table), with ``edits`` (typed values) when the run merged it."""

    base: int
    edits: dict[str, Any] | None = None


def _merged_edits(table: Table, piece: Piece, imported: Imported) -> dict[str, Any]:
    """The representative's row gets the merged description, all text units, the summed
    weight, and the output's direction (a reversed member may lead the merge)."""
    assert piece.output is not None
    output = piece.output
    rows = table.rows
    members = [rows[imported.origins[member]] for member in piece.members]
    lead = next(
        (
            row
            for row in members
            if (_text(table, row, "source"), _text(table, row, "target"))
            == (output.source_entity_name, output.target_entity_name)
        ),
        members[0],
    )
    edits: dict[str, Any] = {
        "source": lead["source"],
        "target": lead["target"],
        "description": output.description,
        "text_unit_ids": ordered_union(table.items(row, "text_unit_ids") or [] for row in members),
    }
    weights = [w for row in members if (w := table.number(row, "weight")) is not None]
    if "weight" in table.columns and weights:
        edits["weight"] = sum(weights)
    return edits


def apply_edits(table: Table, row: Row, edits: dict[str, Any] | None) -> Row:
    """A copy of ``row`` with ``edits`` written in the table's own form."""
    if edits is None:
        return row
    new = dict(row)
    for column, value in edits.items():
        if column == "text_unit_ids":
            table.set_items(new, column, value)
        elif column == "weight":
            table.set_number(new, column, value)
        else:
            new[column] = value
    return new


@dataclass
class ExportPlan:
    """What the export does to the relationships table and to what cites its rows."""

    emitted: dict[int, list[Emitted]]  # distinct row number -> its rows after the run
    id_map: dict[str, str]  # every imported row's GraphRAG id -> the id of its kept row
    moved_readable: dict[str, str]  # merged-away human_readable_id -> the kept row's
    merged_rows: int


def plan_export(
    table: Table, ids: RowIds, imported: Imported, units: dict[int, list[Piece]]
) -> ExportPlan:
    """Each distinct row's rows after the run, and where every row id now points."""
    plan = ExportPlan({}, {}, {}, 0)
    rows = table.rows
    readable = "human_readable_id" in table.columns
    for number, rid in enumerate(ids.ids):
        if rid is None:
            continue
        emitted = plan.emitted.setdefault(number, [])
        kept_id = _text(table, rows[number], "id")
        for piece in units.get(number, []):
            if piece.unchanged:
                emitted.append(Emitted(number))
                if kept_id is not None:
                    plan.id_map.setdefault(kept_id, kept_id)
                continue
            plan.merged_rows += 1
            emitted.append(Emitted(number, _merged_edits(table, piece, imported)))
            kept_readable = _text(table, rows[number], "human_readable_id") if readable else None
            for member in piece.members:
                row = rows[imported.origins[member]]
                old_id = _text(table, row, "id")
                if old_id is not None and kept_id is not None:
                    plan.id_map[old_id] = kept_id
                old_readable = _text(table, row, "human_readable_id") if readable else None
                if old_readable and kept_readable and old_readable != kept_readable:
                    plan.moved_readable[old_readable] = kept_readable
    return plan


def _exported_rows(
    table: Table, ids: RowIds, plan: ExportPlan, progress: Progress | None = None
) -> list[Row]:
    """Every original row position: its rows after the run (a repeat: its first's)."""
    rows: list[Row] = []
    for number in counted(range(len(table.rows)), as_progress(progress), "export_rows"):
        first = ids.repeat_of.get(number, number)
        for emitted in plan.emitted.get(first, []):
            rows.append(apply_edits(table, table.rows[emitted.base], emitted.edits))
    return rows


def _sibling_rows(sibling: Table, main: Table, plan: ExportPlan) -> list[Row] | None:
    """The same relationships in the folder's other format (GraphRAG's test data holds
    both), rewritten row by row through their ids; None when no row is known there."""
    by_id: dict[str, list[Emitted]] = {}
    for number, outputs in plan.emitted.items():
        rid = _text(main, main.rows[number], "id")
        if rid is not None:
            by_id[rid] = outputs
    first_row: dict[str, Row] = {}
    for row in sibling.rows:
        rid = _text(sibling, row, "id")
        if rid is not None:
            first_row.setdefault(rid, row)
    if not any(rid in by_id for rid in first_row):
        return None
    rows: list[Row] = []
    for row in sibling.rows:
        rid = _text(sibling, row, "id")
        if rid is None or rid not in by_id:
            rows.append(row)
            continue
        for emitted in by_id[rid]:
            base_id = _text(main, main.rows[emitted.base], "id")
            base = first_row.get(base_id or "", row)
            rows.append(apply_edits(sibling, base, emitted.edits))
    return rows


def _remap_lists(table: Table, id_map: dict[str, str]) -> list[Row] | None:
    """The rows with their ``relationship_ids`` lists remapped, or None if nothing changes."""
    if "relationship_ids" not in table.columns:
        return None
    changed = False
    rows = []
    for row in table.rows:
        ids = table.items(row, "relationship_ids")
        if ids is None:
            rows.append(row)
            continue
        remapped = ordered_union([[id_map.get(i, i) for i in ids]])
        if remapped == ids:
            rows.append(row)
            continue
        new = dict(row)
        table.set_items(new, "relationship_ids", remapped)
        rows.append(new)
        changed = True
    return rows if changed else None


def _rewrite_value(value: Any, rewriter: CitationRewriter) -> Any:
    """Strings, and the strings inside lists and structs (``findings``), rewritten."""
    if isinstance(value, str):
        return rewriter.rewrite(value)
    if isinstance(value, list):
        return [_rewrite_value(item, rewriter) for item in value]
    if isinstance(value, dict):
        return {key: _rewrite_value(item, rewriter) for key, item in value.items()}
    return value


def _rewrite_reports(
    table: Table, moved: dict[str, str], rewrites: list[dict[str, Any]]
) -> list[Row] | None:
    """Report rows with citations of merged-away rows rewritten (each listed in
    ``rewrites``), or None if no citation changes."""
    if not moved:
        return None
    changed = False
    rows = []
    for row in table.rows:
        new = row
        for column in REPORT_COLUMNS:
            if column not in row:
                continue
            rewriter = CitationRewriter(moved)
            value = _rewrite_value(row[column], rewriter)
            if not rewriter.rewritten:
                continue
            if new is row:
                new = dict(row)
            new[column] = value
            changed = True
            for before, after in rewriter.rewritten:
                rewrites.append(
                    {
                        "table": table.path.name,
                        "report_id": table.text(row, "id"),
                        "column": column,
                        "before": before,
                        "after": after,
                    }
                )
        rows.append(new)
    return rows if changed else None


def _rewrite_copied(
    folder: GraphragFolder,
    copied: list[str],
    stage: Path,
    table: Table,
    plan: ExportPlan,
    rewrites: list[dict[str, Any]],
) -> list[str]:
    """Write again the copied tables that point at relationships (the relationships'
    sibling tables, the community reports' citations, ``relationship_ids`` lists), with
    the run's ids; the tables updated. Citation rewrites are added to ``rewrites``."""
    updated: list[str] = []
    for name in copied:
        path = folder.folder / name
        if "/" in name or table_format(path) is None:
            continue
        stem = path.name[: -len(path.suffix)]
        columns = table_columns(path)
        if stem == folder.relationships.stem and "id" in columns:
            other = read_table(path)
            rows = _sibling_rows(other, table, plan)
        elif stem in REPORTS:
            other = read_table(path)
            rows = _rewrite_reports(other, plan.moved_readable, rewrites)
        elif "relationship_ids" in columns:
            other = read_table(path)
            rows = _remap_lists(other, plan.id_map)
        else:
            continue
        if rows is not None:  # copied (counted), now written again
            other.write(rows, stage / name)
            updated.append(name)
    return updated


def export_graphrag(
    out: Path,
    original: Path,
    target: Path,
    *,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Write the original GraphRAG folder with the run's deduplicated relationships to
    TARGET (whole or not at all: see ``adapters.staging``). Progress: phases ``tables``
    and ``import_rows`` (the original read again, to find where each record came from),
    ``run``, ``export_rows`` and ``files``."""
    progress = as_progress(progress)
    folder = locate(original)
    check_destination(target, overwrite, folder.folder, out)
    tables = _read_tables(folder, progress)
    table = tables.relationships
    imported, ids = _import(folder, tables)
    units = layout(imported, read_run(out, progress))
    progress.start("export_rows", len(table.rows))
    plan = plan_export(table, ids, imported, units)
    exported = _exported_rows(table, ids, plan, progress)
    progress.finish("export_rows")
    rewrites: list[dict[str, Any]] = []
    skip = [folder.relationships.name]
    progress.start("files", len(other_files(folder.folder, skip)) + 2)
    with staged_folder(target) as stage:
        copied = copy_others(folder.folder, stage, skip, lambda: progress.advance("files"))
        updated = _rewrite_copied(folder, copied, stage, table, plan, rewrites)
        table.write(exported, stage / folder.relationships.name)
        progress.advance("files")
        rewritten_content = sorted(
            {str(r["report_id"]) for r in rewrites if r["column"] == "full_content"}
        )
        stale = {
            name: rewritten_content
            for name in copied
            if "community_full_content" in name and rewritten_content
        }
        summary = {
            "format": "graphrag",
            "table_format": folder.format,
            "original": str(original),
            "run": str(out),
            "relationships_before": len(imported.relations),
            "relationships_after": sum(len(e) for e in plan.emitted.values()),
            "rows_before": len(table.rows),
            "rows_after": len(exported),
            "repeated_rows": len(ids.repeat_of),
            "merged_rows": plan.merged_rows,
            "copied_files": len(copied),
            "tables_updated": updated,
            "citations_rewritten": len(rewrites),
            # vectors of report text whose citations changed (only their numbers differ)
            "stale": stale,
            "human_readable_id_mapping": plan.moved_readable,
            "citation_rewrites": rewrites,
            "relationship_id_mapping": plan.id_map,
        }
        write_atomic(stage / EXPORT_FILE, orjson.dumps(summary, option=orjson.OPT_INDENT_2))
        progress.advance("files")
    progress.finish("files")
    return summary
