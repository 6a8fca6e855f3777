"""SIGINT / SIGTERM: the runner that turns them into an orderly stop, and the processes a
run started, which must end with it. (Stopping mid-run and resuming to the same outputs is
tested with the other resume tests in ``test_resume.py``.)"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from relmerge.cli.interrupt import RESUME_HINT, Interrupted, run_interruptible
from tests.factories import record

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_cancels_the_work_and_the_handlers_are_given_back(signum: int) -> None:
    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    unwound: list[str] = []

    async def work() -> None:
        try:
            os.kill(os.getpid(), signum)
            await asyncio.sleep(30)
        finally:
            unwound.append("finally ran")

    with pytest.raises(Interrupted) as caught:
        run_interruptible(work(), grace=600)  # the watchdog would end pytest itself
    assert caught.value.exit_code == 128 + signum
    assert unwound == ["finally ran"]
    assert {number: signal.getsignal(number) for number in before} == before


def test_without_a_signal_the_result_comes_back() -> None:
    async def work() -> int:
        await asyncio.sleep(0)
        return 7

    assert run_interruptible(work()) == 7


BUSY = """
import os, signal, time
from relmerge.cli.interrupt import run_interruptible

async def work():
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(120)  # CPU work that never yields to the event loop

run_interruptible(work(), "stopped while busy", grace=0.5)
"""


def test_work_that_holds_the_event_loop_is_stopped_by_the_watchdog() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BUSY],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,  # a hang guard: without the watchdog it would sleep for two minutes
        check=False,
    )
    assert done.returncode == 143
    assert done.stderr.strip() == "stopped while busy"


def _children(pid: int) -> set[int]:
    """Child processes of ``pid`` (of any of its threads)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found.update(int(child) for child in (task / "children").read_text().split())
        except OSError:
            continue
    return found


def _batch(path: Path, count: int, pairs: int) -> Path:
    """``count`` relations with distinct descriptions over ``pairs`` entity pairs."""
    with path.open("wb") as handle:
        for i in range(count):
            item = record(
                f"r{i}",
                source_entity_id=f"e{i % pairs}",
                target_entity_id=f"f{i % pairs}",
                description=f"Fact number {i} about harbour {i * 7 % 1013} and river {i % 89}.",
            )
            handle.write(orjson.dumps(item) + b"\n")
    return path


def test_an_interrupted_run_ends_its_embedding_helper_process(tmp_path: Path) -> None:
    """A batch large enough for the default embedder to start its helper process; SIGTERM
    while the helper embeds: the run exits 143 and the helper is gone."""
    # distinct texts above the size that starts the helper, every one to the full model
    source = _batch(tmp_path / "relations.jsonl", 4400, pairs=900)
    config = tmp_path / "relmerge.toml"
    config.write_text("two_stage_embedding = false\n")
    command = ["run", str(source), "-o", str(tmp_path / "out"), "--no-cache", "-q"]
    process = subprocess.Popen(
        [sys.executable, "-m", "relmerge", *command, "--config", str(config)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    helpers: set[int] = set()
    deadline = time.monotonic() + 120
    while process.poll() is None and not helpers and time.monotonic() < deadline:
        helpers = _children(process.pid)
        time.sleep(0.01)
    assert helpers, "the run started no helper process"
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stderr.decode()
    assert stderr.decode().strip().splitlines()[-1] == RESUME_HINT
    for helper in helpers:
        assert not Path(f"/proc/{helper}").exists(), "the helper process outlived the run"
    assert not (tmp_path / "out" / "deduplicate_relations_result.json").exists()


def test_an_interrupted_run_ends_its_worker_processes(tmp_path: Path) -> None:
    """A batch of several chunks worked by two worker processes; Ctrl-C (SIGINT to the
    whole process group, as a terminal sends it) while they work: the run exits 130 and
    no worker is left."""
    source = _batch(tmp_path / "relations.jsonl", 3000, pairs=700)
    config = tmp_path / "relmerge.toml"
    # the full model for every text: the workers embed for seconds, not a blink
    config.write_text("records_per_chunk = 500\ntwo_stage_embedding = false\n")
    command = ["run", str(source), "-o", str(tmp_path / "out"), "--no-cache", "-q"]
    process = subprocess.Popen(
        [sys.executable, "-m", "relmerge", *command, "--config", str(config), "--workers", "2"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    workers: set[int] = set()
    deadline = time.monotonic() + 120
    while process.poll() is None and len(workers) < 2 and time.monotonic() < deadline:
        workers = _children(process.pid)
        time.sleep(0.01)
    assert len(workers) == 2, "the run started no worker processes"
    time.sleep(1.0)  # the workers load the model and take their first chunks
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr.decode()
    assert stderr.decode().strip().splitlines()[-1] == RESUME_HINT
    for worker in workers:
        assert not Path(f"/proc/{worker}").exists(), "a worker process outlived the run"
    assert not (tmp_path / "out" / "deduplicate_relations_result.json").exists()
