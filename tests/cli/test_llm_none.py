"""``--llm none`` with an option that needs an LLM is a usage error naming the options, as
``--llm none --llm-base-url`` already was: never an option silently ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from relmerge.cli.options import NEEDS_LLM
from relmerge.data import sample_dir
from tests.support.cli_process import relmerge

SAMPLE = sample_dir() / "relations.jsonl"
VALUES = {
    "--llm-base-url": "http://127.0.0.1:9/v1",
    "--llm-model": "x",
    "--llm-api-key-env": "MY_KEY",
    "--response-format": "json_object",
    "--llm-timeout": "30",
    "--llm-max-answer-tokens": "512",
    "--llm-requests-per-minute": "60",
    "--concurrency": "4",
    "--max-llm-requests": "100",
    "--max-tokens": "10000",
    "--llm-breaker-groups": "3",
    "--llm-price-in": "0.5",
    "--llm-price-out": "1.5",
    "--llm-pack-tokens": "8000",
    "--canary-tokens": "0.3",
}


def _usage_error(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert lines[0].startswith("Usage: "), stderr
    assert lines[-1].startswith("Error: "), stderr
    return lines[-1]


@pytest.mark.parametrize("option", list(NEEDS_LLM.values()))
def test_each_llm_option_with_llm_none_is_a_usage_error(tmp_path: Path, option: str) -> None:
    done = relmerge("run", SAMPLE, "-o", tmp_path / "out", "--llm", "none", option, VALUES[option])
    assert done.returncode == 2, done.stderr
    assert _usage_error(done.stderr) == (
        f"Error: --llm none and {option} exclude each other: {option} needs an LLM; "
        "drop it, or drop --llm none"
    )
    assert not (tmp_path / "out").exists()


def test_every_llm_option_given_is_named(tmp_path: Path) -> None:
    done = relmerge(
        "judge",
        "--candidate",
        "A knows B.",
        "--existing",
        "A met B.",
        "--llm",
        "none",
        "--llm-model",
        "x",
        "--llm-timeout",
        "5",
    )
    assert done.returncode == 2, done.stderr
    assert _usage_error(done.stderr) == (
        "Error: --llm none and --llm-model, --llm-timeout exclude each other: these options "
        "need an LLM; drop them, or drop --llm none"
    )


def test_llm_none_alone_and_options_that_need_no_llm_still_run(tmp_path: Path) -> None:
    done = relmerge(
        "run",
        SAMPLE,
        "-o",
        tmp_path / "out",
        "--llm",
        "none",
        "--embedding",
        "hash",
        "--startup-wait",  # also for an embeddings endpoint
        "1",
        "-q",
    )
    assert done.returncode == 0, done.stderr
