"""GraphRAG tables as rows, in Parquet or CSV, written back in the form they were read.

GraphRAG writes its outputs as Parquet, or (3.x, ``output.type: csv``) as CSV through
pandas, where list columns become text: ``['a', 'b']`` or numpy's ``['a'\\n 'b']``.
A :class:`Table` keeps every row as read (Parquet: Python values; CSV: the cells' text)
and writes rows back with the same schema (Parquet) or the same dialect and list style
(CSV), so rows that were not changed are written back exactly as they were. What the
adapter reads or sets goes through :meth:`Table.text`, :meth:`Table.items`,
:meth:`Table.number` and their setters, which hide the difference.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson
import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped, unused-ignore]

from relmerge.errors import InputError

Format = Literal["parquet", "csv"]
SUFFIXES: dict[str, Format] = {".parquet": "parquet", ".csv": "csv"}
Row = dict[str, Any]


def table_format(path: Path) -> Format | None:
    return SUFFIXES.get(path.suffix.lower())


def parse_list(value: Any) -> list[str] | None:
    """A list cell: a list as is; CSV text as GraphRAG's own reader splits it
    (``['a', 'b']``, ``['a'\\n 'b']`` or empty); None stays None."""
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return [str(item) for item in value]
    text = str(value)
    items = [item.strip("[] '\"") for item in text.replace("\n", ",").split(",")]
    return [item for item in items if item]


@dataclass
class Table:
    """One table file: its rows and what is needed to write rows back in its form."""

    path: Path
    format: Format
    columns: list[str]
    rows: list[Row]
    schema: Any = None  # Parquet: the arrow schema (metadata included)
    line_end: str = "\n"  # CSV
    list_separator: str = ", "  # CSV: pandas writes numpy arrays with "\n "

    # -- reading cells -------------------------------------------------------------
    def text(self, row: Row, column: str) -> str | None:
        value = row.get(column)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return None
        return value if isinstance(value, str) else str(value)

    def items(self, row: Row, column: str) -> list[str] | None:
        return parse_list(row.get(column))

    def number(self, row: Row, column: str) -> float | None:
        value = row.get(column)
        if isinstance(value, bool):
            return None
        if isinstance(value, int | float):
            return None if isinstance(value, float) and math.isnan(value) else float(value)
        try:
            number = float(str(value))
        except (TypeError, ValueError):
            return None
        return None if math.isnan(number) else number

    # -- setting cells (on a copy of a row) -------------------------------------------
    def set_items(self, row: Row, column: str, items: Sequence[str]) -> None:
        if self.format == "parquet":
            row[column] = list(items)
            return
        if not items:
            row[column] = "[]"
            return
        row[column] = "[" + self.list_separator.join(f"'{item}'" for item in items) + "]"

    def set_number(self, row: Row, column: str, value: float) -> None:
        """A number in the column's own type (an integer column stays integral)."""
        if self.format == "parquet":
            kind = self.schema.field(column).type if column in self.schema.names else None
            row[column] = int(value) if kind is not None and pa.types.is_integer(kind) else value
            return
        original = str(row.get(column) or "")
        integral = original.lstrip("-").isdigit() and value == int(value)
        row[column] = str(int(value)) if integral else repr(float(value))

    # -- writing ----------------------------------------------------------------------
    def encode(self, rows: Sequence[Row]) -> bytes:
        if self.format == "csv":
            buffer = io.StringIO(newline="")
            writer = csv.writer(buffer, lineterminator=self.line_end)
            writer.writerow(self.columns)
            writer.writerows([row.get(column, "") for column in self.columns] for row in rows)
            return buffer.getvalue().encode("utf-8")
        sink = pa.BufferOutputStream()
        schema = _pandas_range_index(self.schema, len(rows))
        pq.write_table(pa.Table.from_pylist(list(rows), schema), sink)
        return bytes(sink.getvalue().to_pybytes())

    def write(self, rows: Sequence[Row], path: Path) -> None:
        data = self.encode(rows)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        try:
            temporary.write_bytes(data)
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)


def _pandas_range_index(schema: Any, rows: int) -> Any:
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


def read_table(path: Path, columns: Sequence[str] | None = None) -> Table:
    """The table at ``path`` (Parquet or CSV by its suffix); ``columns``: only those
    that exist (Parquet reads no others; a table read so is not for writing back)."""
    kind = table_format(path)
    if kind == "csv":
        return _read_csv(path, columns)
    try:
        schema = pq.read_schema(path)
        wanted = None if columns is None else [c for c in columns if c in schema.names]
        arrow = pq.read_table(path, columns=wanted)
    except (OSError, pa.ArrowException) as error:
        raise InputError(f"cannot read {path} as Parquet: {error}") from None
    return Table(path, "parquet", list(arrow.schema.names), arrow.to_pylist(), arrow.schema)


def table_columns(path: Path) -> list[str]:
    """The column names of a table file, read without its rows (empty if unreadable:
    a file that is no table is only copied)."""
    try:
        if table_format(path) == "csv":
            with path.open(encoding="utf-8", newline="") as handle:
                return next(csv.reader(handle), [])
        return list(pq.read_schema(path).names)
    except (OSError, UnicodeDecodeError, csv.Error, pa.ArrowException):
        return []


def _read_csv(path: Path, columns: Sequence[str] | None) -> Table:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror}") from None
    try:
        text = data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(
            f"{path} is not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None
    csv.field_size_limit(2**31 - 1)
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        header = next(reader, [])
        rows = [dict(zip(header, cells, strict=False)) for cells in reader if cells]
    except csv.Error as error:
        raise InputError(f"cannot read {path} as CSV: {error}") from None
    first_line = text.split("\n", 1)[0]
    line_end = "\r\n" if first_line.endswith("\r") else "\n"
    separator = (
        "\n " if any("'\n '" in value for row in rows[:50] for value in row.values()) else ", "
    )
    if columns is not None:
        rows = [{c: row[c] for c in columns if c in row} for row in rows]
    return Table(path, "csv", header, rows, line_end=line_end, list_separator=separator)
