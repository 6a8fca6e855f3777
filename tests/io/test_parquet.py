"""Parquet input and output: round trips, bad rows rejected with reasons, bad files refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped, unused-ignore]
import pytest
from click.testing import CliRunner

from relmerge.cli import main
from relmerge.errors import InputError
from relmerge.io.load import read_input
from relmerge.io.parquet import RELATION_SCHEMA, read_parquet, write_parquet
from relmerge.io.records import validate_records
from relmerge.model import ExtractedRelation
from tests.factories import record


def _relations() -> list[ExtractedRelation]:
    return [
        ExtractedRelation.model_validate(
            record(
                "r1",
                attributes={"since": "2019", "role": "CEO"},
                source_chunk_ids=["c1", "c2"],
                chunk_id="c1",
            )
        ),
        ExtractedRelation.model_validate(
            record(
                "r2",
                source_entity_name="上海",
                target_entity_name="徐汇区",
                description="徐汇区是上海的一个区。",
            )
        ),
    ]


def _table(rows: list[dict[str, Any]], schema: Any = None) -> Any:
    return pa.Table.from_pylist(rows, schema)


async def test_written_relations_read_back_as_they_were(tmp_path: Path) -> None:
    path = tmp_path / "rels.parquet"
    assert write_parquet(path, _relations()) == 2
    assert pq.read_schema(path).equals(RELATION_SCHEMA)
    relations, rejected = validate_records(await read_input(path))
    assert rejected == []
    assert relations == _relations()
    assert [raw.origin for raw in read_parquet(path)] == [
        "rels.parquet:row 1",
        "rels.parquet:row 2",
    ]


async def test_bad_rows_are_rejected_with_their_reasons_and_row_numbers(tmp_path: Path) -> None:
    rows = [
        record("ok"),
        record("blank", description="   "),
        record("loop", target_entity_id="e_norrbeck"),
        record("ok", description="a second record with a seen id"),
        record("nulled", name=None),
        record("repeated_key", attributes=[("a", "1"), ("a", "2")]),
        record("fine_attributes", attributes=[("a", "1")]),
    ]
    path = tmp_path / "in.parquet"
    pq.write_table(_table(rows, RELATION_SCHEMA), path)
    relations, rejected = validate_records(await read_input(path))
    assert [relation.relation_id for relation in relations] == ["ok", "fine_attributes"]
    assert relations[1].attributes == {"a": "1"}
    reasons = {item.origin: item.reason for item in rejected}
    assert "non-empty" in reasons["in.parquet:row 2"]
    assert "self-loop" in reasons["in.parquet:row 3"]
    assert "duplicate relation_id 'ok'" in reasons["in.parquet:row 4"]
    assert "name: must be a string, not null" in reasons["in.parquet:row 5"]
    assert "repeated key 'a'" in reasons["in.parquet:row 6"]
    assert len(rejected) == 5


async def test_json_text_and_struct_columns_are_read_like_jsonl(tmp_path: Path) -> None:
    """Tables written by pandas or by hand: attributes as JSON text or a struct."""
    as_text = [
        {
            **record("t1"),
            "attributes": '{"year": 2019, "note": null}',
            "source_chunk_ids": '["c1", "c2"]',
        },
        {**record("t2"), "attributes": "{not json", "source_chunk_ids": "[]"},
    ]
    path = tmp_path / "text.parquet"
    pq.write_table(_table(as_text), path)
    relations, rejected = validate_records(await read_input(path))
    assert relations[0].attributes == {"year": "2019"}  # nulls dropped, numbers as text
    assert relations[0].source_chunk_ids == ["c1", "c2"]
    assert [(item.origin, item.reason.split(" (")[0]) for item in rejected] == [
        ("text.parquet:row 2", "attributes: not valid JSON")
    ]
    assert orjson.loads(rejected[0].record)["relation_id"] == "t2"

    as_struct = [record("s1", attributes={"year": 2019, "active": True})]
    path = tmp_path / "struct.parquet"
    pq.write_table(_table(as_struct), path)
    relations, rejected = validate_records(await read_input(path))
    assert relations[0].attributes == {"year": "2019", "active": "true"}


_ROW = record("x", attributes={"k": "v"})  # an empty struct cannot be written to Parquet


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{k: v for k, v in _ROW.items() if k != "name"}], "missing column(s) name"),
        ([{**_ROW, "weight": 1.0}], "unknown column(s) weight"),
        ([{**_ROW, "description": 7}], "column 'description' is int64"),
        (
            [{"id": "r", "source": "A", "target": "B", "description": "d", "text_unit_ids": []}],
            "looks like a GraphRAG relationships.parquet",
        ),
    ],
)
async def test_a_table_that_is_not_relation_records_is_refused_in_one_line(
    tmp_path: Path, rows: list[dict[str, Any]], message: str
) -> None:
    path = tmp_path / "bad.parquet"
    pq.write_table(_table(rows), path)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        await read_input(path)


async def test_empty_and_corrupt_files_are_input_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty.parquet"
    write_parquet(empty, [])
    with pytest.raises(InputError, match="no rows"):
        await read_input(empty)
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b'{"relation_id": "not parquet"}\n')
    with pytest.raises(InputError, match=r"cannot read .* as Parquet"):
        await read_input(corrupt)


def test_run_reads_a_parquet_input(tmp_path: Path) -> None:
    rows = [
        record("a", description="Ada Lind leads Norrbeck."),
        record("b", description="Ada Lind leads Norrbeck."),
        record("c", description=""),
    ]
    path = tmp_path / "batch.parquet"
    pq.write_table(_table(rows, RELATION_SCHEMA), path)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main, ["run", str(path), "--output", str(out), "--no-semantic", "-q"]
    )
    assert result.exit_code == 0, result.output
    mapping = orjson.loads((out / "relation_id_mapping.json").read_bytes())
    assert mapping["a"] == mapping["b"] != "a"  # identical descriptions merged
    rejected = [orjson.loads(line) for line in (out / "rejected.jsonl").read_bytes().splitlines()]
    assert [item["origin"] for item in rejected] == ["batch.parquet:row 3"]
