from __future__ import annotations

from pathlib import Path

import pytest

from relmerge import DeduplicateRelationsConfig
from relmerge.config import EmbeddingSettings, LLMSettings, load_toml_config
from relmerge.data import sample_dir
from relmerge.errors import ConfigError
from tests.support.cli_process import error_line, relmerge


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


SAMPLE = sample_dir() / "relations.jsonl"


def _run_with(tmp_path: Path, toml: str, *flags: str) -> str:
    """``relmerge run … --config relmerge.toml`` typed in the folder holding the file:
    the one ``error:`` line it ends with (exit 2, nothing done)."""
    (tmp_path / "relmerge.toml").write_text(toml, encoding="utf-8")
    done = relmerge(
        "run", SAMPLE, "-o", tmp_path / "out", "--config", "relmerge.toml", *flags, cwd=tmp_path
    )
    line = error_line(done)
    assert not (tmp_path / "out").exists()
    return line


def test_a_string_where_a_number_belongs_is_refused_naming_the_file(tmp_path: Path) -> None:
    assert _run_with(tmp_path, 'auto_merge_cosine = "0.7"\n') == (
        'error: relmerge.toml: auto_merge_cosine: expected a number, got the string "0.7" '
        '("off" turns it off)'
    )


def test_every_problem_of_every_section_is_said_at_once(tmp_path: Path) -> None:
    """An [llm] typo no longer hides the top-level ones; the file's order is kept."""
    line = _run_with(
        tmp_path,
        "max_round = 3\n"
        "similarity_threshold = 1.5\n"
        'unsure_policy = "keep"\n'
        "max_rounds = 2.5\n"
        'symmetric_relations = ["married to", 3]\n'
        'semantic_merge = "yes"\n'
        "[llm]\n"
        'modle = "qwen"\n'
        'response_format = "json"\n'
        "[embedding]\n"
        'provider = "hsah"\n',
    )
    assert line == (
        "error: relmerge.toml: "
        "max_round: unknown key; did you mean max_rounds?; "
        "similarity_threshold: expected a number between -1 and 1, got 1.5; "
        'unsure_policy: expected one of "keep_both", "merge", got the string "keep" '
        '(did you mean "keep_both"?); '
        "max_rounds: expected an integer, got 2.5; "
        "symmetric_relations[1]: expected a string, got 3; "
        'semantic_merge: expected true or false, got the string "yes"; '
        "llm.modle: unknown key; did you mean llm.model?; "
        'llm.response_format: expected one of "json_schema", "json_object", "none", '
        'got the string "json"; '
        'embedding.provider: expected one of "use", "hash", "openai", got the string "hsah" '
        '(did you mean "hash"?)'
    )


def test_a_key_in_the_wrong_section_names_where_it_belongs(tmp_path: Path) -> None:
    line = _run_with(
        tmp_path,
        'model = "qwen"\n'
        "lmm = { timeout = 30 }\n"
        "[llm]\n"
        "temperature = 0.2\n"
        "colour = 1\n"
        "auto_keep_fuzzy = 95\n",
    )
    assert line == (
        "error: relmerge.toml: "
        "model: unknown key; did you mean llm.model or embedding.model?; "
        "lmm: unknown key; did you mean [llm]?; "
        "llm.temperature: unknown key; did you mean temperature?; "
        "llm.colour: unknown key (known keys: api_key_env, base_url, max_retries, model, "
        "price_in, price_out, "
        "provider, requests_per_minute, response_format, startup_wait, timeout); "
        "llm.auto_keep_fuzzy: unknown key; did you mean auto_keep_fuzzy?"
    )


def test_settings_that_contradict_each_other_are_said_with_the_rest(tmp_path: Path) -> None:
    line = _run_with(tmp_path, "auto_keep_fuzzy = 95\nauto_merge_fuzzy = 90\nmax_rounds = 0\n")
    assert line == (
        "error: relmerge.toml: max_rounds: expected an integer of at least 1, got 0; "
        "auto_keep_fuzzy (95) must not exceed auto_merge_fuzzy (90)"
    )


def test_a_section_that_is_not_a_table_is_named(tmp_path: Path) -> None:
    assert _run_with(tmp_path, 'llm = "openai"\n') == (
        'error: relmerge.toml: llm: expected a table ([llm]), got the string "openai"'
    )


def test_command_line_values_are_named_by_their_option(tmp_path: Path) -> None:
    line = _run_with(tmp_path, "max_attempts = 0\n", "--concurrency", "0")
    assert line == (
        "error: relmerge.toml: max_attempts: expected an integer of at least 1, got 0; "
        "--concurrency: expected an integer of at least 1, got 0"
    )
    done = relmerge(
        "run",
        SAMPLE,
        "-o",
        tmp_path / "out",
        "--llm-base-url",
        "http://x/v1",
        "--llm-model",
        "m",
        "--llm-timeout",
        "0",
    )
    assert error_line(done) == "error: --llm-timeout: expected a number above 0, got 0.0"


def test_a_flag_over_a_wrong_file_value_replaces_it(tmp_path: Path) -> None:
    (tmp_path / "relmerge.toml").write_text('strict = "yes"\n', encoding="utf-8")
    args: list[str | Path] = ["run", SAMPLE, "-o", tmp_path / "out", "--config", "relmerge.toml"]
    args.append("--dry-run")
    assert relmerge(*args, "--strict", cwd=tmp_path).returncode == 0
    assert "strict: expected true or false" in error_line(relmerge(*args, cwd=tmp_path))


def test_the_python_api_raises_a_plain_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        DeduplicateRelationsConfig(auto_merge_cosine=2, unsure_policy="keep", max_round=3)
    assert str(info.value) == (
        "invalid DeduplicateRelationsConfig: "
        'auto_merge_cosine: expected a number between -1 and 1, got 2 ("off" turns it off); '
        'unsure_policy: expected one of "keep_both", "merge", got the string "keep" '
        '(did you mean "keep_both"?); '
        "max_round: unknown key; did you mean max_rounds?"
    )
    assert [key for key, _ in info.value.problems] == [
        "auto_merge_cosine",
        "unsure_policy",
        "max_round",
    ]
    with pytest.raises(ConfigError, match=r'provider: expected one of "none", "openai"'):
        LLMSettings(provider="opanai")
    with pytest.raises(ConfigError, match=r"startup_wait: expected a number of at least 0"):
        EmbeddingSettings(startup_wait=-1)
    # Python callers keep pydantic's conversions (a recipe's "0.7" is read as 0.7).
    assert DeduplicateRelationsConfig(similarity_threshold="0.7").similarity_threshold == 0.7
