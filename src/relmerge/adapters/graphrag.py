"""Microsoft GraphRAG output folders to relmerge input, and deduplicated results back.

GraphRAG writes one ``relationships.parquet`` row per (source, target) pair, with every
extraction of the pair already merged and summarised. What is left to deduplicate are
reversed pairs (A→B and B→A, merged by relmerge since "related" is symmetric) and, with an
``--entity-mapping``, relations of alias entities. Import: one record per row, GraphRAG's
row id as relation id, its ``text_unit_ids`` as chunk ids, the endpoints' ids from
``entities.parquet`` (by title) and the document from ``text_units.parquet`` when present.
Export: ``relationships.parquet`` with one row per output relation (GraphRAG's columns,
rows the run did not change as they were), everything else copied, and the
``relationship_ids`` lists of other tables (text units, communities) pointed at the
surviving rows. Older ``create_final_*.parquet`` names are read too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped, unused-ignore]

from relmerge.adapters.common import (
    EXPORT_FILE,
    NO_LABEL,
    UNKNOWN_DOCUMENT,
    Imported,
    Piece,
    check_destination,
    copy_others,
    layout,
    md5_hex,
    ordered_union,
    read_run,
    write_atomic,
)
from relmerge.errors import InputError
from relmerge.io.parquet import write_table_atomic

RELATIONSHIPS = ("relationships.parquet", "create_final_relationships.parquet")
ENTITIES = ("entities.parquet", "create_final_entities.parquet")
TEXT_UNITS = ("text_units.parquet", "create_final_text_units.parquet")
_REQUIRED = ("source", "target", "description", "text_unit_ids")


@dataclass(frozen=True)
class GraphragFolder:
    relationships: Path
    entities: Path | None
    text_units: Path | None

    @property
    def folder(self) -> Path:
        return self.relationships.parent


def locate(source: Path) -> GraphragFolder:
    """SRC is a GraphRAG output folder or its relationships Parquet file."""
    if source.is_file():
        relationships = source
    elif source.is_dir():
        found = [source / name for name in RELATIONSHIPS if (source / name).is_file()]
        if not found:
            raise InputError(f"no {' or '.join(RELATIONSHIPS)} in {source}")
        relationships = found[0]
    else:
        raise InputError(f"GraphRAG output not found: {source}")
    folder = relationships.parent

    def first(names: Sequence[str]) -> Path | None:
        return next((folder / name for name in names if (folder / name).is_file()), None)

    return GraphragFolder(relationships, first(ENTITIES), first(TEXT_UNITS))


def read_table(path: Path, columns: Sequence[str] | None = None) -> Any:
    try:
        if columns is not None:
            names = pq.read_schema(path).names
            columns = [name for name in columns if name in names]
        return pq.read_table(path, columns=columns)
    except (OSError, pa.ArrowException) as error:
        raise InputError(f"cannot read {path} as Parquet: {error}") from None


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def synthetic_entity_id(title: str) -> str:
    """An id for an endpoint missing from entities.parquet (GraphRAG's test data has some)."""
    return "entity-" + md5_hex(title)[:16]


def _entities(folder: GraphragFolder) -> list[dict[str, Any]]:
    if folder.entities is None:
        return []
    table = read_table(folder.entities, ["id", "title", "name", "type", "description"])
    title_column = "title" if "title" in table.schema.names else "name"
    entities = []
    for row in table.to_pylist():
        title = _text(row.get(title_column))
        if title is None:
            continue
        entities.append(
            {
                "entity_id": _text(row.get("id")) or synthetic_entity_id(title),
                "name": title,
                "type": _text(row.get("type")),
                "profile": _text(row.get("description")),
            }
        )
    return entities


def _documents(folder: GraphragFolder) -> dict[str, str]:
    """Text unit id -> document id (``document_id``, or the first of ``document_ids``)."""
    if folder.text_units is None:
        return {}
    table = read_table(folder.text_units, ["id", "document_id", "document_ids"])
    documents = {}
    for row in table.to_pylist():
        document = row.get("document_id")
        if document is None and row.get("document_ids"):
            document = row["document_ids"][0]
        if isinstance(row.get("id"), str) and _text(document):
            documents[row["id"]] = str(document).strip()
    return documents


def relation_ids(rows: Sequence[dict[str, Any]]) -> list[str]:
    """GraphRAG's row id when it has one, else an id derived from the row's content."""
    ids: list[str] = []
    seen: set[str] = set()
    for number, row in enumerate(rows):
        rid = _text(row.get("id"))
        if rid is None or rid in seen:
            content = "\n".join(str(row.get(k)) for k in ("source", "target", "description"))
            rid = f"graphrag-{number}-{md5_hex(content)[:12]}"
        seen.add(rid)
        ids.append(rid)
    return ids


def import_graphrag(source: Path) -> Imported:
    """Relation records (one per relationships row) and entities of a GraphRAG output."""
    folder = locate(source)
    table = read_table(folder.relationships, ["id", *_REQUIRED])
    missing = [name for name in _REQUIRED if name not in table.schema.names]
    if missing:
        raise InputError(
            f"{folder.relationships} has no column(s) {', '.join(missing)}: "
            "not a GraphRAG relationships table"
        )
    rows = table.to_pylist()
    entities = _entities(folder)
    entity_ids = {entity["name"]: entity["entity_id"] for entity in entities}
    documents = _documents(folder)
    relations, origins, synthesized = [], {}, set()
    for number, (rid, row) in enumerate(zip(relation_ids(rows), rows, strict=True)):
        names = [_text(row["source"]), _text(row["target"])]
        ends = []
        for name in names:
            if name is not None and name not in entity_ids:
                synthesized.add(name)
            ends.append(None if name is None else entity_ids.get(name, synthetic_entity_id(name)))
        units = row["text_unit_ids"]
        units = [str(unit) for unit in units] if isinstance(units, list) else units
        chunk = units[0] if isinstance(units, list) and units else None
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
                "description": row["description"],
                "attributes": {},
                "source_chunk_ids": units,
            }
        )
        origins[rid] = number
    counts = {"relationships": len(rows), "endpoints_missing_from_entities": len(synthesized)}
    return Imported("graphrag", relations, entities, origins, counts)


def _merged_row(rows: Sequence[dict[str, Any]], piece: Piece, imported: Imported) -> dict[str, Any]:
    """The first member's row with the merged description, summed weight, all text units.

    Direction (source, target) is the output's: a reversed member may lead the merge.
    """
    assert piece.output is not None
    output = piece.output
    members = [rows[imported.origins[member]] for member in piece.members]
    lead = next(
        (
            row
            for row in members
            if (_text(row["source"]), _text(row["target"]))
            == (output.source_entity_name, output.target_entity_name)
        ),
        members[0],
    )
    row = dict(members[0])
    row["source"], row["target"] = lead["source"], lead["target"]
    row["description"] = output.description
    row["text_unit_ids"] = ordered_union(member["text_unit_ids"] or [] for member in members)
    weights = [m["weight"] for m in members if isinstance(m.get("weight"), int | float)]
    if "weight" in row and weights:
        row["weight"] = sum(weights)
    return row


def _pandas_metadata(schema: Any, rows: int) -> Any:
    """A pandas RangeIndex recorded in the schema must span the new row count."""
    metadata = dict(schema.metadata or {})
    if b"pandas" not in metadata:
        return schema
    pandas = orjson.loads(metadata[b"pandas"])
    for index in pandas.get("index_columns", []):
        if isinstance(index, dict) and index.get("kind") == "range":
            index["stop"] = index.get("start", 0) + rows * index.get("step", 1)
    metadata[b"pandas"] = orjson.dumps(pandas)
    return schema.with_metadata(metadata)


def _remap_relationship_ids(path: Path, id_map: dict[str, str]) -> Any | None:
    """The table with its ``relationship_ids`` lists remapped, or None if nothing changes."""
    table = read_table(path)
    if "relationship_ids" not in table.schema.names:
        return None
    index = table.schema.get_field_index("relationship_ids")
    values = table.column(index).to_pylist()
    remapped = [
        None if ids is None else ordered_union([[id_map.get(i, i) for i in ids]]) for ids in values
    ]
    if remapped == values:
        return None
    field = table.schema.field(index)
    return table.set_column(index, field, pa.array(remapped, type=field.type))


def export_graphrag(
    out: Path, original: Path, target: Path, *, overwrite: bool = False
) -> dict[str, Any]:
    """Write the original GraphRAG folder with the run's deduplicated relationships to TARGET."""
    folder = locate(original)
    check_destination(folder.folder, target, overwrite)
    imported = import_graphrag(original)
    units = layout(imported, read_run(out))
    table = read_table(folder.relationships)
    rows = table.to_pylist()
    exported: list[dict[str, Any]] = []
    id_map: dict[str, str] = {}
    merged = 0
    for number, row in enumerate(rows):
        for piece in units.get(number, []):
            new = dict(row) if piece.unchanged else _merged_row(rows, piece, imported)
            merged += 0 if piece.unchanged else 1
            exported.append(new)
            for member in piece.members or (piece.relation_id,):
                old = rows[imported.origins[member]].get("id")
                if isinstance(old, str) and isinstance(new.get("id"), str):
                    id_map[old] = new["id"]
    if "human_readable_id" in table.schema.names:
        for number, row in enumerate(exported):
            row["human_readable_id"] = number
    copied = copy_others(folder.folder, target, [folder.relationships.name])
    updated = []
    for name in copied:
        if "/" not in name and name.endswith(".parquet"):
            remapped = _remap_relationship_ids(folder.folder / name, id_map)
            if remapped is not None:
                write_table_atomic(remapped, target / name)
                updated.append(name)
    schema = _pandas_metadata(table.schema, len(exported))
    write_table_atomic(pa.Table.from_pylist(exported, schema), target / folder.relationships.name)
    summary = {
        "format": "graphrag",
        "original": str(original),
        "run": str(out),
        "relationships_before": len(rows),
        "relationships_after": len(exported),
        "merged_rows": merged,
        "copied_files": len(copied),
        "relationship_ids_updated_in": updated,
        "relationship_id_mapping": id_map,
    }
    write_atomic(target / EXPORT_FILE, orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    return summary
