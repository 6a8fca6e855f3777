"""Input readers and record validation: every bad record is set aside with its reason."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from relmerge import DeduplicateRelationsConfig
from relmerge.errors import InputError
from relmerge.io.load import read_input
from relmerge.io.records import validate_records
from relmerge.providers.base import NoLanguageModel
from relmerge.run.pipeline import run_pipeline
from relmerge.stores import MemoryStore
from tests.factories import record


def _write_jsonl(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


async def test_bad_records_are_rejected_with_reasons_and_nothing_is_lost(tmp_path: Path) -> None:
    good = record("ok")
    no_name = record("no_name")
    del no_name["name"]
    lines = [
        orjson.dumps(good),
        b'{"relation_id": "broken", ',
        orjson.dumps(no_name),
        orjson.dumps(record("empty", description="  ")),
        orjson.dumps(record("loop", target_entity_id="e_norrbeck")),
        orjson.dumps(record("ok", description="second record with a seen id")),
        b"\xff\xfe not utf-8",
        b"[1, 2]",
        orjson.dumps(record("typed", attributes=["not", "a", "dict"])),
        b"",
    ]
    raws = await read_input(_write_jsonl(tmp_path / "in.jsonl", lines))
    relations, rejected = validate_records(raws)
    assert [relation.relation_id for relation in relations] == ["ok"]
    reasons = {item.origin: item.reason for item in rejected}
    assert len(rejected) == 8
    assert "malformed JSON" in reasons["in.jsonl:2"]
    assert "missing field 'name'" in reasons["in.jsonl:3"]
    assert "non-empty" in reasons["in.jsonl:4"]
    assert "self-loop" in reasons["in.jsonl:5"]
    assert "duplicate relation_id 'ok'" in reasons["in.jsonl:6"]
    assert "not UTF-8" in reasons["in.jsonl:7"]
    assert "JSON object" in reasons["in.jsonl:8"]
    assert "attributes" in reasons["in.jsonl:9"]

    store = MemoryStore()
    output = await run_pipeline(
        raws, None, DeduplicateRelationsConfig(semantic_merge=False), NoLanguageModel(), store
    )
    assert output.result["rejected_count"] == 8
    assert output.relation_id_mapping == {"ok": "ok"}
    lines_out = [orjson.loads(line) for line in store.objects["rejected.jsonl"].splitlines()]
    assert len(lines_out) == 8
    assert all({"origin", "reason", "record"} <= set(line) for line in lines_out)
    assert lines_out[1]["record"]["relation_id"] == "no_name"


async def test_directory_of_json_files_is_read_in_key_order(tmp_path: Path) -> None:
    for name in ["b", "a", "c"]:
        (tmp_path / f"{name}.json").write_bytes(orjson.dumps(record(name)))
    (tmp_path / "notes.txt").write_text("ignored")
    raws = await read_input(tmp_path)
    assert [raw.origin for raw in raws] == ["a.json", "b.json", "c.json"]


async def test_store_layout_uses_relation_keys_and_refuses_escaping_keys(tmp_path: Path) -> None:
    (tmp_path / "relations").mkdir()
    (tmp_path / "relations" / "r1.json").write_bytes(orjson.dumps(record("r1")))
    (tmp_path / "relation_keys.json").write_bytes(
        orjson.dumps(["relations/r1.json", "../outside.json", "relations/missing.json"])
    )
    relations, rejected = validate_records(await read_input(tmp_path))
    assert [relation.relation_id for relation in relations] == ["r1"]
    assert ["'.' or '..'" in rejected[0].reason, "no object" in rejected[1].reason] == [True, True]


async def test_missing_input_and_empty_input_are_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        await read_input(tmp_path / "nope.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(InputError, match="no relation records"):
        await run_pipeline(
            await read_input(empty),
            None,
            DeduplicateRelationsConfig(semantic_merge=False),
            NoLanguageModel(),
            MemoryStore(),
        )


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        (["a", "b"], "JSON object"),
        ({"a": 1}, "strings"),
        ({"a": "b", "b": "a2", "a2": "a"}, "cycle"),
    ],
)
async def test_bad_entity_mapping_is_a_clear_error(mapping: object, message: str) -> None:
    raws = await read_input_from([record("r1")])
    with pytest.raises(InputError, match=message):
        await run_pipeline(
            raws,
            mapping,
            DeduplicateRelationsConfig(semantic_merge=False),
            NoLanguageModel(),
            MemoryStore(),
        )


async def read_input_from(records: list[dict[str, object]]):
    from relmerge.io.records import RawRecord

    return [RawRecord(origin=str(i), data=item) for i, item in enumerate(records)]
