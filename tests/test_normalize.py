from __future__ import annotations

from relmerge.normalize import normalize_description, normalize_key_text


def test_key_text_folds_width_case_and_spaces() -> None:
    assert normalize_key_text("  Has\tDistrict ") == "has district"
    assert normalize_key_text("ＣＥＯ  Of") == "ceo of"
    assert normalize_key_text("包含行政区") == "包含行政区"
    assert normalize_key_text("Straße") == normalize_key_text("STRASSE")


def test_description_ignores_final_punctuation_only() -> None:
    assert normalize_description("Ada is CEO.") == normalize_description("ada is ceo")
    assert normalize_description("徐汇区属于上海市。") == normalize_description("徐汇区属于上海市")
    assert normalize_description("500 crowns") != normalize_description("5,000 crowns")
