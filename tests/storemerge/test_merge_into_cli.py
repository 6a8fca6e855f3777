"""``relmerge merge-into`` as a user runs it, on both backends: killed mid-merge and run
again, review answers applied by the same command, bad input and bad store URLs."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from relmerge.data import sample_dir
from relmerge.graphstore import open_graph_store
from relmerge.review.queue import ReviewQueue
from tests.graphstore.test_store_cli import sample_with_a_bad_record
from tests.support.cli_process import ROOT, error_line, relmerge
from tests.support.llm_server import LLMServer, Reply, merge_first_handler
from tests.support.postgres import PostgresServer

SAMPLE = sample_dir()
CONTEXT = (
    "--entity-mapping",
    str(SAMPLE / "entity_id_mapping.json"),
    "--entities",
    str(SAMPLE / "entities.jsonl"),
    "--embedding",
    "hash",
)


def merge_into(url: str, out: Path, *extra: str, source: Path | None = None) -> Any:
    return relmerge(
        "merge-into", url, source or SAMPLE / "relations.jsonl", "-o", out, *CONTEXT, *extra
    )


async def _dump(url: str) -> list[bytes]:
    async with open_graph_store(url) as store:
        return sorted([relation.to_json() async for relation in store.dump()])


def dump(url: str) -> list[bytes]:
    return asyncio.run(_dump(url))


def mapping(out: Path) -> dict[str, str]:
    loaded: dict[str, str] = orjson.loads((out / "relation_id_mapping.json").read_bytes())
    return loaded


def another_store(store_url: str, tmp_path: Path, postgres: PostgresServer | None) -> str:
    """An empty store of the backend of ``store_url`` (a reference to compare with)."""
    if store_url.startswith("sqlite:"):
        return f"sqlite:///{tmp_path / 'reference.db'}"
    assert postgres is not None
    return postgres.new_database()


class HeldLLM:
    """A model that holds its first answer until released: the merge is mid-decision."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.release = threading.Event()

    def __call__(self, body: dict[str, Any]) -> Reply:
        self.arrived.set()
        self.release.wait(120)
        return merge_first_handler(body)


def test_a_killed_merge_into_run_again_equals_an_uninterrupted_one(
    store_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    held = HeldLLM()
    with LLMServer(handler=held) as server:
        llm = ("--llm-base-url", server.base_url, "--llm-model", "fake", "--no-semantic")
        assert relmerge("store", "init", store_url).returncode == 0
        out = tmp_path / "out"
        command = [sys.executable, "-m", "relmerge", "merge-into", store_url]
        command += [str(SAMPLE / "relations.jsonl"), "-o", str(out), *CONTEXT, *llm]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        child = subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)
        try:
            assert held.arrived.wait(240), "the merge never asked the model"
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
            held.release.set()
        assert child.returncode == -signal.SIGKILL
        assert dump(store_url) == []  # killed while deciding: nothing applied
        again = merge_into(store_url, out, *llm)
        assert again.returncode == 0, again.stderr
        postgres = request.getfixturevalue("postgres_server") if "postgresql" in store_url else None
        reference = another_store(store_url, tmp_path, postgres)
        assert relmerge("store", "init", reference).returncode == 0
        whole = merge_into(reference, tmp_path / "reference", *llm)
        assert whole.returncode == 0, whole.stderr
    assert dump(store_url) == dump(reference)
    assert mapping(out) == mapping(tmp_path / "reference")


def test_review_answers_apply_when_the_same_merge_into_runs_again(
    store_url: str, tmp_path: Path
) -> None:
    assert relmerge("store", "init", store_url).returncode == 0
    out = tmp_path / "out"
    first = merge_into(store_url, out)
    assert first.returncode == 0, first.stderr
    assert "relmerge review" in first.stdout
    queue = ReviewQueue(out)
    before = mapping(out)
    question = next(q for q in queue.pending() if len({before[m] for m in q["member_ids"]}) > 1)
    members = question["member_ids"]
    queue.answer(question["id"], "merge")  # answers.jsonl, as `relmerge review` writes it
    again = merge_into(store_url, out)
    assert again.returncode == 0, again.stderr
    after = mapping(out)
    assert len({after[m] for m in members}) == 1
    stored = {orjson.loads(line)["relation_id"] for line in dump(store_url)}
    assert set(after.values()) <= stored
    assert sorted(after) == sorted(before)  # nothing lost


def test_a_rejected_record_is_set_aside_as_run_does(store_url: str, tmp_path: Path) -> None:
    assert relmerge("store", "init", store_url).returncode == 0
    source = sample_with_a_bad_record(tmp_path)
    done = merge_into(store_url, tmp_path / "out", source=source)
    ran = relmerge("run", source, "-o", tmp_path / "run", *CONTEXT)
    assert done.returncode == 0 == ran.returncode, done.stderr
    warning = [line for line in done.stderr.splitlines() if line.startswith("warning: ")]
    assert warning == [
        line.replace(str(tmp_path / "run"), str(tmp_path / "out"))
        for line in ran.stderr.splitlines()
        if line.startswith("warning: ")
    ]
    rejected = (tmp_path / "out" / "rejected.jsonl").read_bytes().splitlines()
    assert rejected == (tmp_path / "run" / "rejected.jsonl").read_bytes().splitlines()
    assert "bad_1" not in mapping(tmp_path / "out")


def test_an_unreadable_input_is_one_line_and_writes_nothing(store_url: str, tmp_path: Path) -> None:
    assert relmerge("store", "init", store_url).returncode == 0
    out = tmp_path / "out"
    missing = tmp_path / "no_such.jsonl"
    error_line(merge_into(store_url, out, source=missing), str(missing))
    error_line(relmerge("run", missing, "-o", tmp_path / "run"), str(missing))
    assert not out.exists() and dump(store_url) == []


def test_a_bad_store_url_is_exit_2_with_the_password_hidden(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    with socket.socket() as probe:  # a port where nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    nowhere = f"postgresql://ann:hunter22@127.0.0.1:{port}/graph"
    for url in (nowhere, postgres_server.url("no_such_database")):
        url = url.replace("relmerge@", "relmerge:hunter22@", 1)
        out = tmp_path / "out"
        line = error_line(merge_into(url, out))
        assert "hunter22" not in line and "***" in line
        assert not out.exists()
