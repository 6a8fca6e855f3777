"""The text of a merged relation: every member's distinct description survives."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from relmerge.decide.merged import (
    DESCRIPTION_SEPARATOR,
    joined_description,
    keeps_every_description,
)

WORDS = st.sampled_from(["Ada", "leads", "the", "firm", "since", "2019", "公司", "创立", "。", "."])
TEXTS = st.lists(WORDS, min_size=1, max_size=8).map(" ".join)


@given(st.lists(TEXTS, min_size=1, max_size=6))
def test_every_member_description_survives(descriptions: list[str]) -> None:
    joined = joined_description(descriptions)
    assert keeps_every_description(joined, descriptions)
    assert joined_description([joined]) == joined  # joining again changes nothing


def test_distinct_descriptions_in_input_order_with_the_separator() -> None:
    joined = joined_description(
        ["Lactic acidosis risk.", "Avoid hypoglycaemia.", "lactic acidosis risk"]
    )
    assert joined == "Lactic acidosis risk." + DESCRIPTION_SEPARATOR + "Avoid hypoglycaemia."
    assert "<SEP>" not in joined


def test_a_description_another_holds_is_not_repeated() -> None:
    assert joined_description(["Ada leads.", "Ada leads. Since 2019."]) == "Ada leads. Since 2019."
