"""Validation of ``relation_cluster`` answers: ids, HetaDB pairs, and what is refused."""

from __future__ import annotations

from typing import Any

import pytest

from relmerge.errors import InvalidAnswerError
from relmerge.prompts.cluster_relations import validate_answer

RECORDS: list[dict[str, Any]] = [
    {"relation_id": "r1", "source_entity_name": "上海市", "target_entity_name": "徐汇区"},
    {"relation_id": "r2", "source_entity_name": "上海市", "target_entity_name": "徐汇区"},
    {"relation_id": "r3", "source_entity_name": "徐汇区", "target_entity_name": "上海市"},
    {"relation_id": "r4", "source_entity_name": "上海市", "target_entity_name": "徐汇区"},
]
ENTRY = {
    "Node1": "上海市",
    "Node2": "徐汇区",
    "Relation": "包含行政区",
    "Type": "空间关系",
    "Description": "徐汇区是上海市下辖行政区。",
    "Attr": {"level": 2},
    "merge_tag": True,
}


def test_ids_merge_and_unlisted_records_stay_apart() -> None:
    outcome = validate_answer(
        {"relation_list": [{**ENTRY, "relation_id": "r1"}], "mapping_table": {"r1": ["r1", "r2"]}},
        RECORDS,
    )
    assert outcome.groups == [[0, 1]]
    assert outcome.fields[0]["name"] == "包含行政区"
    assert outcome.fields[0]["attributes"] == {"level": "2"}


def test_hetadb_pair_keys_resolve_to_the_records_of_that_direction() -> None:
    outcome = validate_answer({"mapping_table": {"徐汇区||上海市": ["上海市||徐汇区"]}}, RECORDS)
    assert outcome.groups == [[0, 1, 2, 3]]


def test_a_record_mapped_only_to_itself_is_a_no_op() -> None:
    outcome = validate_answer({"mapping_table": {"r1": ["r1"], "r2": []}}, RECORDS)
    assert outcome.groups == []


def test_unsure_groups_are_returned() -> None:
    outcome = validate_answer({"mapping_table": {}, "unsure": [["r1", "r4"]]}, RECORDS)
    assert outcome.unsure == [[0, 3]]


def test_groups_listed_once_per_member_are_one_group() -> None:
    """Small models write a group as an adjacency list; it still names one fact."""
    answer = {"mapping_table": {"r1": ["r2", "r4"], "r2": ["r1", "r4"], "r4": ["r1"]}}
    assert validate_answer(answer, RECORDS).groups == [[0, 1, 3]]
    chained = {"mapping_table": {"r1": ["r2"], "r4": ["r2"]}}
    assert validate_answer(chained, RECORDS).groups == [[0, 1, 3]]


def test_records_both_merged_and_unsure_are_unsure() -> None:
    answer = {"mapping_table": {"r1": ["r2", "r4"]}, "unsure": [["r1", "r2"]]}
    outcome = validate_answer(answer, RECORDS)
    assert (outcome.groups, outcome.unsure) == ([], [[0, 1]])
    apart = {"mapping_table": {"r1": ["r2"]}, "unsure": [["r2", "r4"]]}  # r4 is not merged
    assert validate_answer(apart, RECORDS).groups == [[0, 1]]


def test_a_merged_records_member_ids_name_it() -> None:
    records = [{**RECORDS[0], "merged_from": ["m1", "m2"]}, RECORDS[1]]
    assert validate_answer({"mapping_table": {"m2": ["r2"]}}, records).groups == [[0, 1]]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ({"mapping_table": {"r1": ["r1", "r9"]}}, "not an input"),
        ({"mapping_table": {"北京市||徐汇区": ["r1"]}}, "not an input"),
        (
            {"relation_list": [{**ENTRY, "Node1": "北京市"}], "mapping_table": {"r1": ["r2"]}},
            "not an input entity",
        ),
        (
            {"relation_list": [{**ENTRY, "Description": ""}], "mapping_table": {"r1": ["r2"]}},
            "Description",
        ),
        ({"relation_list": []}, "mapping_table"),
        ({"mapping_table": {"r1": "r2"}}, "must be a list"),
        ([], "JSON object"),
    ],
)
def test_invalid_answers_are_refused(answer: Any, message: str) -> None:
    with pytest.raises(InvalidAnswerError, match=message):
        validate_answer(answer, RECORDS)
