"""Progress a user can follow: bars with totals on a terminal, a line per phase in a log,
nothing with --quiet. Driven over the 1,733 real records of ../shared/data/real, with an
LLM served on 127.0.0.1 so that every phase runs."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from relmerge.eval.gold_judge import GoldJudge
from tests.support.gold_judge import gold_task_handler
from tests.support.llm_server import LLMServer, Reply

REAL = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "real"
RELMERGE = [sys.executable, "-m", "relmerge"]
LABELS = (
    "reading input",
    "exact stage",
    "embedding",
    "semantic stage",
    "LLM requests",
    "writing",
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")

pytestmark = pytest.mark.skipif(
    not REAL.is_dir() and not os.environ.get("CI"), reason="../shared/data/real not present"
)


@pytest.fixture(scope="module")
def real_records(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("real") / "relations.jsonl"
    lines = [
        line
        for source in sorted(REAL.glob("*/relations.jsonl"))
        for line in source.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    assert len(lines) == 1733
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _slow(handler: Callable[[dict[str, Any]], Reply]) -> Callable[[dict[str, Any]], Reply]:
    return lambda body: dataclasses.replace(handler(body), delay=0.02)


@pytest.fixture(scope="module")
def judge() -> Iterator[LLMServer]:
    """A model that finds every pair it is asked about distinct (no gold: all apart)."""
    with LLMServer(handler=_slow(gold_task_handler(GoldJudge({})))) as server:
        yield server


def _command(records: Path, out: Path, judge: LLMServer, *extra: str) -> list[str]:
    return [
        *RELMERGE,
        "run",
        str(records),
        "--output",
        str(out),
        "--llm-base-url",
        judge.base_url,
        "--llm-model",
        "judge",
        # a model that keeps every pair apart also keeps a record and its copy apart: the
        # canaries would (rightly) stop it; these tests are about progress, not canaries
        "--canaries",
        "0",
        *extra,
    ]


def _screen_lines(raw: str) -> list[str]:
    """What the terminal showed, line by line, escape sequences removed."""
    return [line.strip() for line in re.split(r"[\r\n]+", _ANSI.sub("", raw)) if line.strip()]


def test_every_bar_on_a_terminal_has_a_total(
    real_records: Path, judge: LLMServer, tmp_path: Path
) -> None:
    command = _command(real_records, tmp_path / "out", judge)
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
    lines = _screen_lines(child.before or "")
    bars = [line for line in lines if re.search(r"\b(eta|took) ", line)]
    shown = {label for label in LABELS for line in bars if label in line}
    assert shown == set(LABELS), shown
    for line in bars:
        assert re.search(r"[\d.,]+( [kMG]?B)?/[\d.,]+", line), line  # done/total
        assert "/?" not in line, line
    assert any("eta 0:" in line for line in bars)  # time left, once a rate is known
    assert any(re.search(r"embedding .* texts/s", line) for line in bars)
    assert any(re.search(r"LLM requests .* sent", line) for line in bars)
    assert "relmerge run" in child.before  # the summary follows


def test_a_log_gets_one_line_per_phase(
    real_records: Path, judge: LLMServer, tmp_path: Path
) -> None:
    command = _command(real_records, tmp_path / "out", judge, "--embedding", "hash")
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    lines = done.stderr.strip().splitlines()
    # The log ends with the warning about the real data's rejected records.
    warning = next(i for i, line in enumerate(lines) if line.startswith("warning: "))
    assert lines[warning].startswith("warning: 4 input records rejected, set aside in ")
    lines = lines[:warning]
    assert [line.split(":")[0] for line in lines] == list(LABELS), lines
    assert lines[0].startswith("reading input: 1.") and "MB/" in lines[0]
    assert re.match(r"exact stage: ([\d,]+)/\1 groups in ", lines[1]), lines[1]
    assert re.search(r"texts/s\)$", lines[2]), lines[2]
    assert re.match(r"LLM requests: ([\d,]+)/\1 answered in .* \(\1 sent", lines[4]), lines[4]


def test_quiet_shows_nothing(real_records: Path, judge: LLMServer, tmp_path: Path) -> None:
    command = _command(real_records, tmp_path / "out", judge, "--embedding", "hash", "--quiet")
    child = pexpect.spawn(command[0], command[1:], encoding="utf-8", timeout=600)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert _screen_lines(child.before or "") == []
