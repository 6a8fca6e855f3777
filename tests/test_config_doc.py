"""The configuration reference is generated from the pydantic models when the site is
built; these tests check that it lists every field with a description, and that what it
says about defaults and TOML sections is what the loader reads."""

from __future__ import annotations

from pathlib import Path

from relmerge.config import (
    SECTIONS as TOML_SECTIONS,
)
from relmerge.config import (
    DeduplicateRelationsConfig,
    EmbeddingSettings,
    LLMSettings,
    load_toml_config,
)
from relmerge.config_doc import (
    NOTES,
    SECTIONS,
    UNSET,
    describe,
    field_docs,
    render_config_reference,
)


def test_the_sections_are_the_models_a_config_file_holds() -> None:
    assert [model for _, model, _ in SECTIONS] == [
        DeduplicateRelationsConfig,
        LLMSettings,
        EmbeddingSettings,
    ]
    tables = {where for _, _, where in SECTIONS} - {"top level"}
    assert tables == {f"[{name}]" for name in TOML_SECTIONS}


def test_every_field_of_every_model_is_a_row_of_the_page() -> None:
    page = render_config_reference()
    for title, model, _ in SECTIONS:
        section = page.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
        rows = [line for line in section.splitlines() if line.startswith("| `")]
        assert [row.split("`")[1] for row in rows] == list(model.model_fields), title


def test_every_field_has_a_description() -> None:
    for _, model, _ in SECTIONS:
        for name in model.model_fields:
            assert describe(model, name), f"{model.__name__}.{name} has no description"


def test_notes_only_fill_in_for_fields_without_a_description() -> None:
    for (model, name), note in NOTES.items():
        assert name in model.model_fields, f"note for a field that is gone: {name}"
        assert not model.model_fields[name].description, (
            f"{model.__name__}.{name} now has its own description: drop its note"
        )
        assert note.strip()


def test_types_ranges_and_defaults_are_rendered_for_a_reader() -> None:
    rows = {row.name: row for row in field_docs(DeduplicateRelationsConfig)}
    assert rows["semantic_merge"].default == "true"
    assert rows["max_llm_requests"].default == UNSET
    assert rows["max_llm_requests"].type == "int or none, ≥ 0"
    assert rows["auto_merge_cosine"].type == "float or none, ≥ -1, ≤ 1"
    assert rows["auto_merge_cosine"].default == "0.5"
    assert rows["generic_name_share"].type == "float, > 0, ≤ 1"
    assert rows["symmetric_relations"].type == "list of str"
    assert rows["symmetric_relations"].default == "[]"
    assert rows["unsure_policy"].type == '"keep_both" | "merge"'
    assert rows["unsure_policy"].default == '"keep_both"'
    page = render_config_reference()
    assert "| `max_llm_requests`<br>int or none, ≥ 0<br>default *unset* |" in page


def test_a_file_written_from_the_page_loads_as_the_defaults(tmp_path: Path) -> None:
    """Every default, written where the page says it goes, is read back unchanged."""
    lines: list[str] = []
    for _, model, where in sorted(SECTIONS, key=lambda section: section[2] != "top level"):
        if where != "top level":
            lines.append(where)
        lines += [
            f"{row.name} = {row.default}" for row in field_docs(model) if row.default != UNSET
        ]
    path = tmp_path / "relmerge.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    loaded = load_toml_config(path)
    assert DeduplicateRelationsConfig(**loaded.step) == DeduplicateRelationsConfig()
    assert LLMSettings(**loaded.llm) == LLMSettings()
    assert EmbeddingSettings(**loaded.embedding) == EmbeddingSettings()
