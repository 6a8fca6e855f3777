"""Cache and resume through the real CLI: re-runs cost nothing, killed and interrupted
runs resume.

The judge is the gold judge behind the loopback HTTP server; runs are real processes on a
real disk. The kills are SIGKILL, so nothing gets a chance to clean up; the interrupts are
SIGINT (Ctrl-C) and SIGTERM, which relmerge answers by stopping and saying how to resume.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from relmerge.cli import main
from relmerge.cli.interrupt import RESUME_HINT
from tests.cli.test_run_cli import DEV, check_outputs, needs_dev
from tests.support.dev_cli import dev_run_args, run_outputs
from tests.support.gold_judge import dev_gold_judge, gold_task_handler
from tests.support.llm_server import LLMServer, Reply

pytestmark = needs_dev
ROOT = Path(__file__).resolve().parents[2]


def run_args(out: Path, base_url: str, *extra: str) -> list[str]:
    return dev_run_args(out, base_url, 2, *extra)


outputs = run_outputs


def body_key(body: Any) -> bytes:
    return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)


@pytest.fixture(scope="module")
def judge_server() -> Iterator[LLMServer]:
    """The gold judge, a little slow (as real endpoints are) so that kills land mid-run."""
    handle = gold_task_handler(dev_gold_judge(DEV))

    def slow(body: dict[str, Any]) -> Reply:
        return dataclasses.replace(handle(body), delay=0.03)

    with LLMServer(handler=slow) as server:
        yield server


@pytest.fixture(scope="module")
def reference(judge_server: LLMServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One uninterrupted run, for the others to equal."""
    out = tmp_path_factory.mktemp("reference") / "out"
    result = CliRunner().invoke(main, run_args(out, judge_server.base_url, "--no-cache"))
    assert result.exit_code == 0, result.output
    return out


def test_a_rerun_into_the_same_out_sends_nothing_and_writes_the_same(
    judge_server: LLMServer, reference: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    before = len(judge_server.group_requests)
    assert CliRunner().invoke(main, run_args(out, judge_server.base_url)).exit_code == 0
    first = orjson.loads((out / "deduplicate_relations_result.json").read_bytes())
    sent = len(judge_server.group_requests) - before
    assert first["llm_requests"] == sent > 0
    assert outputs(out) == outputs(reference)

    checks = judge_server.preflight_count
    assert CliRunner().invoke(main, run_args(out, judge_server.base_url)).exit_code == 0
    second = check_outputs(out, DEV / "relations.jsonl")
    assert len(judge_server.group_requests) - before == sent  # not one more question
    # Every run checks its endpoint first, even one whose answers are all cached.
    assert judge_server.preflight_count == checks + 1
    assert second["preflight_requests"] == 1
    assert second["llm_requests"] == 0
    assert second["llm_cache_hits"] == sent
    assert outputs(out) == outputs(reference)


def test_a_shared_cache_serves_another_output_directory(
    judge_server: LLMServer, reference: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "shared.sqlite"
    first, second = tmp_path / "a", tmp_path / "b"
    args = ("--cache", str(cache))
    assert CliRunner().invoke(main, run_args(first, judge_server.base_url, *args)).exit_code == 0
    before = len(judge_server.group_requests)
    assert CliRunner().invoke(main, run_args(second, judge_server.base_url, *args)).exit_code == 0
    assert len(judge_server.group_requests) == before
    assert outputs(second) == outputs(reference)
    assert not (second / ".relmerge" / "cache.sqlite").exists()


def test_cache_and_no_cache_exclude_each_other(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, run_args(tmp_path / "o", "http://127.0.0.1:9/v1", "--no-cache", "--cache", "x")
    )
    assert result.exit_code == 2
    assert "exclude each other" in result.output


def _spawn(args: list[str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "relmerge", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _signal_when(process: subprocess.Popen[bytes], ready: Callable[[], bool], signum: int) -> bool:
    """Send ``signum`` to ``process`` as soon as ``ready()``; False if it finished first."""
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline:
        if ready():
            process.send_signal(signum)
            return True
        time.sleep(0.005)
    return False


def _kill_when(process: subprocess.Popen[bytes], ready: Callable[[], bool]) -> bool:
    """SIGKILL ``process`` as soon as ``ready()``; False if it finished first."""
    killed = _signal_when(process, ready, signal.SIGKILL)
    process.wait()
    return killed


KILL_POINTS: dict[str, Callable[[LLMServer, int, Path, int], bool]] = {
    # Before any answer, during the exact stage, deep in the semantic stage, while writing
    # (counting the requests about groups, not the endpoint check before the run, against
    # ``total``: the uninterrupted run's; packed, a run sends few).
    "first request": lambda server, start, out, total: len(server.group_requests) > start,
    "a few answers": lambda server, start, out, total: (
        len(server.group_requests) >= start + max(2, total // 20)
    ),
    "most answers": lambda server, start, out, total: (
        len(server.group_requests) >= start + total * 3 // 4
    ),
    "writing relations": lambda server, start, out, total: any(
        (out / "deduplicated_relations").glob("*.json")
    ),
}


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_a_killed_run_resumes_to_the_same_outputs_without_repeating_answers(
    point: str, judge_server: LLMServer, reference: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    args = run_args(out, judge_server.base_url)
    start = len(judge_server.group_requests)
    total = orjson.loads((reference / "deduplicate_relations_result.json").read_bytes())
    ready = KILL_POINTS[point]
    killed = _kill_when(
        _spawn(args), lambda: ready(judge_server, start, out, total["llm_requests"])
    )
    assert killed, f"the run finished before the kill point {point!r}"
    asked_before = {body_key(body) for body in judge_server.group_requests[start:]}
    # A killed run never looks complete.
    assert not (out / "deduplicate_relations_result.json").exists()

    resumed_from = len(judge_server.group_requests)
    process = _spawn(args)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr.decode()
    assert outputs(out) == outputs(reference)
    check_outputs(out, DEV / "relations.jsonl")
    repeated = [
        body
        for body in judge_server.group_requests[resumed_from:]
        if body_key(body) in asked_before
    ]
    # Only the requests in flight at the kill (at most --concurrency 2) are asked again.
    assert len(repeated) <= 2


@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"]
)
def test_an_interrupted_run_stops_says_how_to_resume_and_resumes_to_the_same_outputs(
    signum: int, status: int, judge_server: LLMServer, reference: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    args = run_args(out, judge_server.base_url)
    start = len(judge_server.group_requests)
    process = _spawn(args)
    signalled = _signal_when(process, lambda: len(judge_server.group_requests) >= start + 5, signum)
    at_signal = len(judge_server.group_requests)
    _, stderr = process.communicate(timeout=120)
    assert signalled, "the run finished before it could be interrupted"
    message = stderr.decode()
    assert process.returncode == status, message
    assert message.strip().splitlines()[-1] == RESUME_HINT
    assert "Traceback" not in message and "Aborted" not in message
    # It stopped sending: at most the requests already on their way (--concurrency 2).
    assert len(judge_server.group_requests) - at_signal <= 2
    # The output is marked incomplete; the answers received are in the cache.
    assert not (out / "deduplicate_relations_result.json").exists()
    asked_before = {body_key(body) for body in judge_server.group_requests[start:]}

    resumed_from = len(judge_server.group_requests)
    resumed = _spawn(args)
    _, stderr = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, stderr.decode()
    assert outputs(out) == outputs(reference)
    check_outputs(out, DEV / "relations.jsonl")
    repeated = [
        body
        for body in judge_server.group_requests[resumed_from:]
        if body_key(body) in asked_before
    ]
    assert len(repeated) <= 2  # only what was in flight when the signal came


def test_a_killed_run_is_not_mixed_with_a_run_of_other_inputs(
    judge_server: LLMServer, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    start = len(judge_server.group_requests)
    process = _spawn(run_args(out, judge_server.base_url))
    assert _kill_when(process, lambda: len(judge_server.group_requests) >= start + 3)
    other = run_args(out, judge_server.base_url, "--no-semantic")
    refused = CliRunner().invoke(main, other)
    assert refused.exit_code == 2
    assert "--overwrite" in refused.output
    replaced = CliRunner().invoke(main, [*other, "--overwrite"])
    assert replaced.exit_code == 0, replaced.output
    check_outputs(out, DEV / "relations.jsonl")


def test_the_cache_must_be_a_local_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, run_args(tmp_path / "o", "http://127.0.0.1:9/v1", "--cache", "s3://bucket/c.sqlite")
    )
    assert result.exit_code == 2
    assert "local file" in result.output
    assert not (tmp_path / "o").exists()
