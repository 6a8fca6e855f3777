"""Each phase's closing line gives the time that phase worked, not the run's whole time.

With a slow LLM, every phase once reported the run's time ("exact stage: 30/30 groups in
1060.3 s", "embedding: 91/91 texts in 1060.1 s (0 texts/s)"): phases ended only at the
end of the run. Driven as the user ran it: ``relmerge run`` in a subprocess (a log: one
line per phase) and in a pseudo-terminal (bars), against a loopback LLM that takes a
quarter of a second per answer. The phases that never wait for the LLM (exact stage,
embedding) must report less than the LLM line, whose seconds are the LLM's own.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.support.dev_cli import DEV
from tests.support.gold_judge import dev_gold_judge, gold_task_handler
from tests.support.llm_server import LLMServer

RELMERGE = [sys.executable, "-m", "relmerge"]
_LINE = re.compile(r"^(?P<label>[a-zA-Z ]+): (?P<amount>.+?) in (?P<seconds>[\d.]+) s(?P<rest>.*)$")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")

pytestmark = pytest.mark.skipif(not DEV.is_dir(), reason="shared dev set not present")


@pytest.fixture(scope="module")
def slow_judge() -> Iterator[LLMServer]:
    handler = gold_task_handler(dev_gold_judge(DEV))
    with LLMServer(handler=lambda body: dataclasses.replace(handler(body), delay=0.25)) as server:
        yield server


def _command(out: Path, judge: LLMServer, *extra: str) -> list[str]:
    return [
        *RELMERGE,
        "run",
        str(DEV / "relations.jsonl"),
        "--entity-mapping",
        str(DEV / "entity_id_mapping.json"),
        "--entities",
        str(DEV / "entities.jsonl"),
        "--output",
        str(out),
        "--llm-base-url",
        judge.base_url,
        "--llm-model",
        "gold",
        "--embedding",
        "hash",
        "--llm-pack-tokens",  # one question a request: many slow requests, seconds of LLM time
        "0",
        *extra,
    ]


def _phase_lines(stderr: str) -> dict[str, re.Match[str]]:
    matches = [_LINE.match(line) for line in stderr.strip().splitlines()]
    assert all(matches), stderr
    return {m["label"]: m for m in matches if m is not None}


@pytest.mark.parametrize(
    "engine",
    [
        ["--workers", "0"],  # one chunk, worked in this process
        ["--workers", "2", "--config", "{tmp}/chunks.toml"],  # chunks on worker processes
    ],
    ids=["in-process", "worker-processes"],
)
def test_phases_that_do_not_wait_for_the_llm_do_not_claim_its_time(
    slow_judge: LLMServer, tmp_path: Path, engine: list[str]
) -> None:
    (tmp_path / "chunks.toml").write_text("records_per_chunk = 120\n", encoding="utf-8")
    extra = [arg.format(tmp=tmp_path) for arg in engine]
    command = _command(tmp_path / "out", slow_judge, *extra)
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    lines = _phase_lines(done.stderr)
    assert list(lines) == [
        "reading input",
        "exact stage",
        "embedding",
        "semantic stage",
        "LLM requests",
        "writing",
    ]
    llm = float(lines["LLM requests"]["seconds"])
    requests = int(lines["LLM requests"]["amount"].split("/")[0].replace(",", ""))
    assert requests > 20  # each took a quarter of a second: seconds of LLM time in all
    assert float(lines["exact stage"]["seconds"]) < llm
    assert float(lines["embedding"]["seconds"]) < llm
    # the semantic stage is the one that waits for the LLM: it holds the LLM's time
    assert float(lines["semantic stage"]["seconds"]) >= llm
    # the rate is the texts over the embedding's own seconds
    embed = lines["embedding"]
    texts = int(embed["amount"].split("/")[0].replace(",", ""))
    rate = re.fullmatch(r" \(([\d,]+) texts/s\)", embed["rest"])
    assert rate is not None, embed.string
    seconds = float(embed["seconds"])
    if seconds >= 0.1:  # shown to 0.1 s: a rate over less is not checked against it
        shown = int(rate[1].replace(",", ""))
        assert texts / (seconds + 0.05) - 1 <= shown <= texts / (seconds - 0.05) + 1


def _took(lines: list[str], label: str) -> int:
    """Seconds of the last "took H:MM:SS" shown on the bar of ``label``."""
    shown = [
        m for line in lines if label in line for m in re.findall(r"took (\d+):(\d\d):(\d\d)", line)
    ]
    assert shown, (label, lines[-20:])
    hours, minutes, seconds = shown[-1]
    return int(hours) * 3600 + int(minutes) * 60 + int(seconds)


def test_a_bar_that_ended_shows_the_time_its_phase_worked(
    slow_judge: LLMServer, tmp_path: Path
) -> None:
    command = _command(tmp_path / "out", slow_judge, "--concurrency", "2")
    child = pexpect.spawn(
        command[0],
        command[1:],
        env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "150"},
        dimensions=(40, 150),
        encoding="utf-8",
        timeout=600,
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    lines = [line.strip() for line in re.split(r"[\r\n]+", _ANSI.sub("", child.before or ""))]
    llm = _took(lines, "LLM requests")
    assert llm >= 2  # concurrency 2, a quarter of a second each: many seconds
    assert _took(lines, "exact stage") < llm
    assert _took(lines, "embedding") < llm
