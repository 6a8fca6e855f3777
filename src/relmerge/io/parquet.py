"""Parquet files of relation records: read as ``RawRecord`` rows, write relations.

A Parquet file is a table, so problems come at two levels. A column that is missing, extra
or of a type no record could be read from is the file's problem: one ``InputError`` naming
it (every row rejected for the same reason would only hide it). A bad value in one row is
that row's problem: it goes through the normal validation and is rejected with its reason,
under the origin ``file.parquet:row N`` (N counts from 1, like JSONL line numbers).

``attributes`` may be a map or struct column, or a string column of JSON objects;
``source_chunk_ids`` a list column or a string column of JSON arrays.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped, unused-ignore]

from relmerge.errors import InputError
from relmerge.io.records import RawRecord, unreadable
from relmerge.model import RELATION_FIELDS, ExtractedRelation

_TEXT_FIELDS = RELATION_FIELDS[:10]
_BATCH_ROWS = 4096

RELATION_SCHEMA = pa.schema(
    [(name, pa.string()) for name in _TEXT_FIELDS]
    + [
        ("attributes", pa.map_(pa.string(), pa.string())),
        ("source_chunk_ids", pa.list_(pa.string())),
    ]
)

# What looks like another tool's table, with the command that converts it.
_FOREIGN_HINTS = {
    frozenset({"source", "target", "text_unit_ids"}): "a GraphRAG relationships.parquet: "
    "convert it first with `relmerge import graphrag`",
}


def _is_text(kind: Any) -> bool:
    if pa.types.is_dictionary(kind):
        return _is_text(kind.value_type)
    return bool(
        pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)
    )


def _is_scalar(kind: Any) -> bool:
    return bool(
        _is_text(kind)
        or pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_boolean(kind)
    )


def _column_problem(name: str, kind: Any) -> str | None:
    """Why no value of a column of this type could be a valid field, or None."""
    if name in _TEXT_FIELDS:
        ok = _is_text(kind)
        expected = "a string column"
    elif name == "attributes":
        ok = (
            _is_text(kind)
            or (pa.types.is_map(kind) and _is_text(kind.key_type) and _is_scalar(kind.item_type))
            or (pa.types.is_struct(kind) and all(_is_scalar(field.type) for field in kind))
        )
        expected = "a map or struct of scalars, or a string column of JSON objects"
    else:  # source_chunk_ids
        ok = _is_text(kind) or (
            (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and _is_text(kind.value_type)
        )
        expected = "a list of strings, or a string column of JSON arrays"
    return None if ok else f"column {name!r} is {kind}, expected {expected}"


def _check_columns(path: Path, schema: Any) -> None:
    names = list(schema.names)
    missing = [name for name in RELATION_FIELDS if name not in names]
    unknown = [name for name in names if name not in RELATION_FIELDS]
    if missing or unknown:
        hint = next(
            (text for columns, text in _FOREIGN_HINTS.items() if columns <= set(names)), None
        )
        parts = [f"missing column(s) {', '.join(missing)}"] if missing else []
        parts += [f"unknown column(s) {', '.join(unknown)}"] if unknown else []
        reason = "; ".join(parts)
        if hint:
            reason = f"it looks like {hint} ({reason})"
        raise InputError(f"{path} is not a Parquet file of relation records: {reason}")
    for name in names:
        problem = _column_problem(name, schema.field(name).type)
        if problem:
            raise InputError(f"{path}: {problem}")


def _json_field(row: dict[str, Any], name: str) -> str | None:
    """Parse a JSON-text cell in place; return why it is not JSON, or None."""
    value = row[name]
    if not isinstance(value, str):
        return None
    try:
        row[name] = orjson.loads(value)
    except orjson.JSONDecodeError as error:
        return f"{name}: not valid JSON ({error})"
    return None


def _row_record(origin: str, row: dict[str, Any], attributes_is_map: bool) -> RawRecord:
    if attributes_is_map and isinstance(row["attributes"], list):
        pairs = row["attributes"]
        keys = [key for key, _ in pairs]
        if len(set(keys)) != len(keys):
            repeated = next(key for key in keys if keys.count(key) > 1)
            return unreadable(
                origin, f"attributes: repeated key {repeated!r}", orjson.dumps(row).decode()
            )
        row["attributes"] = dict(pairs)
    for name in ("attributes", "source_chunk_ids"):
        problem = _json_field(row, name)
        if problem:
            return unreadable(origin, problem, orjson.dumps(row).decode())
    return RawRecord(origin=origin, data=row)


def iter_parquet(path: Path) -> Iterator[RawRecord]:
    """Rows in file order, read a batch at a time (memory bounded by the batch)."""
    try:
        parquet = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as error:
        raise InputError(f"cannot read {path} as Parquet: {error}") from None
    schema = parquet.schema_arrow
    _check_columns(path, schema)
    attributes_is_map = pa.types.is_map(schema.field("attributes").type)
    name = path.name.encode("utf-8", "backslashreplace").decode("utf-8")
    number = 0
    try:
        for batch in parquet.iter_batches(batch_size=_BATCH_ROWS):
            for row in batch.to_pylist():
                number += 1
                yield _row_record(f"{name}:row {number}", row, attributes_is_map)
    except (OSError, pa.ArrowException) as error:
        raise InputError(f"cannot read {path} past row {number}: {error}") from None


def read_parquet(path: Path) -> list[RawRecord]:
    """All rows of a relations Parquet file; a file with no rows is an input error."""
    records = list(iter_parquet(path))
    if not records:
        raise InputError(f"no relation records in {path}: the table has no rows")
    return records


def relations_table(relations: Iterable[ExtractedRelation]) -> Any:
    """An Arrow table in :data:`RELATION_SCHEMA` (attributes as a map, chunk ids a list)."""
    return pa.Table.from_pylist([relation.to_dict() for relation in relations], RELATION_SCHEMA)


def write_table_atomic(table: Any, path: Path) -> None:
    """Write through a temporary file and a rename: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        pq.write_table(table, temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def write_parquet(path: Path, relations: Iterable[ExtractedRelation]) -> int:
    """Write relations as a Parquet file that :func:`read_parquet` reads back as they were."""
    table = relations_table(relations)
    write_table_atomic(table, path)
    return int(table.num_rows)
