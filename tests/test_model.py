from __future__ import annotations

import orjson
import pytest
from pydantic import ValidationError

from relmerge.ids import dedup_chunk_id, merged_relation_id
from relmerge.model import RELATION_FIELDS, ExtractedRelation
from tests.factories import record


def test_fields_are_exactly_the_contract() -> None:
    assert tuple(ExtractedRelation.model_fields) == RELATION_FIELDS
    assert len(RELATION_FIELDS) == 12


def test_strings_are_trimmed_and_must_not_be_empty() -> None:
    relation = ExtractedRelation.model_validate(record("r1", name="  CEO of \n"))
    assert relation.name == "CEO of"
    with pytest.raises(ValidationError, match="non-empty"):
        ExtractedRelation.model_validate(record("r1", description="   "))


@pytest.mark.parametrize("field", ["relation_id", "name", "attributes", "source_chunk_ids"])
def test_missing_field_is_invalid(field: str) -> None:
    data = record("r1")
    del data[field]
    with pytest.raises(ValidationError):
        ExtractedRelation.model_validate(data)


def test_wrong_types_and_unknown_fields_are_invalid() -> None:
    with pytest.raises(ValidationError):
        ExtractedRelation.model_validate(record("r1", name=5))
    with pytest.raises(ValidationError):
        ExtractedRelation.model_validate({**record("r1"), "weight": 1.0})


def test_self_loop_is_invalid() -> None:
    with pytest.raises(ValidationError, match="self-loop"):
        ExtractedRelation.model_validate(record("r1", target_entity_id="e_norrbeck"))


def test_attributes_are_coerced_to_strings() -> None:
    relation = ExtractedRelation.model_validate(
        record(
            "r1",
            attributes={
                " since ": 2017,
                "stake": 0.2,
                "active": True,
                "tags": ["a", "b"],
                "gone": None,
                "note": "  kept  ",
                "place": {"城市": "上海"},
            },
        )
    )
    assert relation.attributes == {
        "since": "2017",
        "stake": "0.2",
        "active": "true",
        "tags": '["a","b"]',
        "note": "kept",
        "place": '{"城市":"上海"}',
    }


def test_source_chunk_ids_lose_repeats_and_default_to_chunk_id() -> None:
    relation = ExtractedRelation.model_validate(record("r1", source_chunk_ids=["c1", "c2", "c1"]))
    assert relation.source_chunk_ids == ["c1", "c2"]
    assert relation.chunk_ids() == ["c1", "c2", "chunk_r1"]
    empty = ExtractedRelation.model_validate(record("r2", source_chunk_ids=[]))
    assert empty.source_chunk_ids == ["chunk_r2"]


def test_json_keeps_non_ascii_and_field_order() -> None:
    relation = ExtractedRelation.model_validate(record("r1", name="包含行政区"))
    text = relation.to_json().decode("utf-8")
    assert "包含行政区" in text
    assert list(orjson.loads(text)) == list(RELATION_FIELDS)
    assert ExtractedRelation.model_validate_json(text) == relation


def test_merged_ids_are_stable_and_order_free() -> None:
    a = merged_relation_id(["r2", "r1"], "CEO of")
    assert a == merged_relation_id(["r1", "r2"], " CEO of ")
    assert a.startswith("relation_") and len(a) == len("relation_") + 16
    assert a != merged_relation_id(["r1", "r2"], "CTO of")
    assert dedup_chunk_id(["c1", "c2"]).startswith("dedup_")
    assert dedup_chunk_id(["c1", "c2"]) != dedup_chunk_id(["c2", "c1"])
