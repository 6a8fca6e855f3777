from __future__ import annotations

from pathlib import Path

import pytest

from relmerge import DeduplicateRelationsConfig
from relmerge.config import load_toml_config
from relmerge.data import sample_dir
from relmerge.errors import ConfigError


def test_defaults_are_the_seeds() -> None:
    config = DeduplicateRelationsConfig()
    assert config.model_dump(
        include={
            "deduplicated_relations_prefix",
            "relation_keys_artifact",
            "entity_id_mapping_artifact",
            "semantic_merge",
            "similarity_threshold",
            "max_rounds",
            "llm_batch_size",
            "semantic_batch_size",
            "semantic_batch_count",
            "max_attempts",
            "temperature",
        }
    ) == {
        "deduplicated_relations_prefix": "deduplicated_relations",
        "relation_keys_artifact": "relation_keys",
        "entity_id_mapping_artifact": "entity_id_mapping",
        "semantic_merge": True,
        "similarity_threshold": 0.9,
        "max_rounds": 10,
        "llm_batch_size": 20,
        "semantic_batch_size": 100,
        "semantic_batch_count": 4,
        "max_attempts": 3,
        "temperature": 0.0,
    }


def test_invalid_values_are_all_reported_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        DeduplicateRelationsConfig(max_rounds=0, llm_batch_size=0, similarity_threshold=3)
    message = str(info.value)
    assert "max_rounds" in message and "llm_batch_size" in message
    assert "similarity_threshold" in message


def test_unknown_field_and_empty_prefix_are_errors() -> None:
    with pytest.raises(ConfigError, match="max_round"):
        DeduplicateRelationsConfig(max_round=3)
    with pytest.raises(ConfigError, match="deduplicated_relations_prefix"):
        DeduplicateRelationsConfig(deduplicated_relations_prefix=" / ")


def test_toml_file_splits_step_and_llm_settings(tmp_path: Path) -> None:
    path = tmp_path / "relmerge.toml"
    path.write_text('semantic_merge = false\nllm_batch_size = 5\n[llm]\nmodel = "qwen"\n')
    loaded = load_toml_config(path)
    assert loaded.step == {"semantic_merge": False, "llm_batch_size": 5}
    assert loaded.llm == {"model": "qwen"}
    path.write_text("semantic_merge = ")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_toml_config(path)


def test_a_toml_file_with_a_removed_threshold_is_refused_through_the_cli(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from relmerge.cli import main

    config = tmp_path / "old.toml"
    config.write_text("auto_merge_name_cosine = 0.6\nauto_merge_cosine = 0.9\n")
    records = sample_dir() / "relations.jsonl"
    result = CliRunner().invoke(
        main, ["run", str(records), "-o", str(tmp_path / "out"), "--config", str(config)]
    )
    assert result.exit_code == 2
    assert "auto_merge_name_cosine: removed" in result.output
    assert "auto_merge_cosine" in result.output
    assert not (tmp_path / "out").exists()


def test_a_toml_file_turns_a_band_off_with_off(tmp_path: Path) -> None:
    path = tmp_path / "relmerge.toml"
    path.write_text('auto_merge_cosine = "off"\n')
    config = DeduplicateRelationsConfig(**load_toml_config(path).step)
    assert config.auto_merge_cosine is None
