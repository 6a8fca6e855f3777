"""Near-miss canaries: two different facts about the block's own entities, in its language."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relmerge.decide.near_miss import FAMILIES, language_of, near_miss_pair


def _shown(description: str, direction: str = "A->B", name: str = "r") -> dict[str, Any]:
    return {
        "relation_id": "rel_1",
        "source_entity_name": "Ada" if direction == "A->B" else "Bo",
        "target_entity_name": "Bo" if direction == "A->B" else "Ada",
        "direction": direction,
        "type": "T",
        "name": name,
        "description": description,
        "attributes": {"weight": 1},
        "merged_from": ["rel_2"],
    }


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("Ada met Bo in the city of the north.", "en"),
        ("Ada a rencontré Bo dans la ville du nord.", "fr"),
        ("艾达在北方的城市遇见了博。", "zh"),
        ("", "en"),
    ],
)
def test_language_of(text: str, language: str) -> None:
    assert language_of(text) == language


def test_every_language_has_the_same_families_of_two_different_facts() -> None:
    counts = {len(families) for families in FAMILIES.values()}
    assert counts == {len(FAMILIES["en"])}
    for families in FAMILIES.values():
        for first, second in families:
            assert first != second and first[1] != second[1]
            assert all("{a}" in s[1] and "{b}" in s[1] for s in (first, second))


@given(st.integers(min_value=0, max_value=10_000))
def test_the_pair_names_the_blocks_entities_as_a_to_b(draw: int) -> None:
    first, second = near_miss_pair([_shown("Bo taught Ada.", "B->A")], draw)
    for record in (first, second):
        assert record["source_entity_name"] == "Ada" and record["target_entity_name"] == "Bo"
        assert record["direction"] == "A->B"
        assert "Ada" in record["description"] and "Bo" in record["description"]
        assert "merged_from" not in record and record["attributes"] == {}
        assert record["type"] == "T"  # shaped like the block's records
    assert first["description"] != second["description"]


def test_the_pair_is_in_the_blocks_language_one_sentence_in_each_of_two() -> None:
    chinese = [_shown("艾达与博签订了合同。")]
    first, second = near_miss_pair(chinese, 3)
    assert language_of(first["description"]) == language_of(second["description"]) == "zh"
    mixed = [_shown("艾达与博签订了合同。"), _shown("艾达与博签订了合同。"), _shown("Ada met Bo.")]
    languages = {language_of(r["description"]) for r in near_miss_pair(mixed, 5)}
    assert languages == {"zh", "en"}


def test_records_without_names_get_none() -> None:
    first, second = near_miss_pair([_shown("Ada met Bo.", name="")], 1)
    assert first["name"] == second["name"] == ""


def test_braces_in_a_name_are_kept_and_mentions_not_copied() -> None:
    shown = {**_shown("Ada met Bo."), "source_entity_name": "X{b}", "mentions": 3}
    for record in near_miss_pair([shown], 0):
        assert "X{b}" in record["description"] and "mentions" not in record
