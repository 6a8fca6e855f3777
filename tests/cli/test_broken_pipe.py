"""A reader that closes standard output early (``relmerge … | head -1``): relmerge ends
quietly with 141 (128 + SIGPIPE), as any command cut off by a closed pipe, in a real
process writing to a real pipe."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from relmerge.cli.pipe import BROKEN_PIPE_EXIT
from relmerge.data import sample_dir
from tests.adapters.fixtures import entity, relationship, write_graphrag

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = sample_dir()
PIPE_BYTES = 4096  # one page: the smallest pipe Linux makes
needs_pipe_size = pytest.mark.skipif(
    not hasattr(fcntl, "F_SETPIPE_SZ"), reason="sizing a pipe needs Linux"
)


def _relmerge(*args: str | Path, stdout: int) -> subprocess.Popen[bytes]:
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    return subprocess.Popen(
        [sys.executable, "-m", "relmerge", *map(str, args)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path},
        stdout=stdout,
        stderr=subprocess.PIPE,
    )


def _deep(folder: Path, length: int) -> Path:
    """A folder whose path is about ``length`` characters: long lines to print."""
    while len(str(folder)) < length:
        folder = folder / ("d" * 200)
    return folder


@needs_pipe_size
def test_import_whose_reader_stops_after_the_first_line_ends_quietly(tmp_path: Path) -> None:
    """`relmerge import graphrag … | head -1`. The printed paths are long and the pipe one
    page, so after the first line relmerge is still writing when the reader closes: its
    next write fails every time, not only when the reader happens to be quick."""
    source = write_graphrag(
        _deep(tmp_path / "graphrag", 1500),
        [relationship("r1", "A", "B", "A knows B.", ["t1"], 1.0)],
        [entity("a", "A", "PERSON", "A."), entity("b", "B", "PERSON", "B.")],
    )
    output = _deep(tmp_path / "imported", 1500)
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    process = _relmerge("import", "graphrag", source, "--output", output, stdout=write_end)
    os.close(write_end)
    first = b""
    while not first.endswith(b"\n"):  # one byte at a time: nothing past the first line
        byte = os.read(read_end, 1)
        assert byte, "relmerge printed no line"
        first += byte
    # The rest (the commands to run next name the folders five times) cannot fit.
    assert 4 * len(str(output)) > fcntl.fcntl(read_end, fcntl.F_GETPIPE_SZ)
    os.close(read_end)
    _, stderr = process.communicate(timeout=120)
    assert first.startswith(b"Imported 1 relation ")
    # Progress lines only: no "internal error: BrokenPipeError", no "Exception ignored".
    for line in stderr.decode().splitlines():
        assert line.split(":")[0] in {"reading tables", "converting rows", "writing"}, line
    assert process.returncode == BROKEN_PIPE_EXIT


def test_a_table_for_a_reader_that_is_gone_ends_quietly(tmp_path: Path) -> None:
    """`relmerge run --dry-run … | true`: the reader is gone before the table is printed
    (rich's console, which would exit 1 by itself, says so through the same exit)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    process = _relmerge(
        "run",
        EXAMPLE / "relations.jsonl",
        "--output",
        tmp_path / "out",
        "--dry-run",
        stdout=write_end,
    )
    os.close(write_end)
    _, stderr = process.communicate(timeout=120)
    assert stderr.decode() == ""
    assert process.returncode == BROKEN_PIPE_EXIT
    assert not (tmp_path / "out").exists()


def test_a_broken_pipe_that_is_not_standard_output_is_still_reported() -> None:
    """Only standard output's reader going away is quiet: another broken pipe (a helper
    process, a socket) is a failure, reported as such."""
    code = (
        "import click, relmerge.cli as cli\n"
        "@cli.main.command('boom')\n"
        "def boom():\n"
        "    raise BrokenPipeError(32, 'Broken pipe')\n"
        "cli.main(['boom'])\n"
    )
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "internal error: BrokenPipeError" in done.stderr.decode()
