"""``relmerge store info`` shows every figure and column whole: plain text in a pipe or a
log (no table cropped to 80 columns), and on a narrow terminal a table that folds its
cells rather than drop the count columns."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from relmerge.data import sample_dir
from tests.support.cli_process import ROOT, relmerge

BATCH = "reconcile-1de2bb55254b6a4e0a634660-with-a-long-name"


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A store whose one batch has a long id, at a long path."""
    folder = tmp_path / ("a-folder-with-a-rather-long-name-" * 3)
    folder.mkdir()
    url = f"sqlite:///{folder / 'graph.db'}"
    assert relmerge("store", "init", url).returncode == 0
    loaded = relmerge("store", "load", url, sample_dir() / "relations.jsonl", "--batch-id", BATCH)
    assert loaded.returncode == 0, loaded.stderr
    return url


def test_in_a_pipe_every_figure_and_column_is_printed_whole(url: str) -> None:
    done = relmerge("store", "info", url)  # stdout is a pipe; COLUMNS as a log has it
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"relmerge store {url}"
    assert "  relations: 17" in lines and "  batches: 1" in lines
    header = lines[lines.index("last batches (newest first):") + 1].split()
    assert header == ["batch", "kind", "status", "applied", "(UTC)", "inserted", "updated"]
    row = lines[-1].split()
    assert row[0] == BATCH and row[1:3] == ["load", "applied"] and row[-2:] == ["17", "0"]
    assert "…" not in done.stdout


def test_on_a_narrow_terminal_no_column_is_dropped(url: str) -> None:
    pexpect = pytest.importorskip("pexpect")
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    child = pexpect.spawn(
        sys.executable,
        ["-m", "relmerge", "store", "info", url],
        env={**os.environ, "PYTHONPATH": path, "TERM": "dumb", "NO_COLOR": "1"},
        dimensions=(40, 60),
        encoding="utf-8",
        timeout=120,
    )
    child.expect(pexpect.EOF)
    text = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", child.before)
    assert "…" not in text
    table = text[text.index("last batches") :]
    rows = [line.split() for line in table.splitlines()]
    # The batch's row: its first line ends with both counts, in their own columns.
    first = next(row for row in rows if row and row[0].startswith("reconc"))
    assert first[-2:] == ["17", "0"], table
    assert "".join(row[0] for row in rows[rows.index(first) :] if row)[: len(BATCH)] == BATCH
