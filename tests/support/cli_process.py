"""``relmerge`` run as a user runs it: a separate process, its own stdout and stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def relmerge(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m relmerge ARGS`` from this checkout's ``src``; never a traceback to hide."""
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "relmerge", *map(str, args)],
        cwd=cwd or ROOT,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def piped(
    *args: str | Path, keys: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``relmerge ARGS`` with ``keys`` piped one per line, as a script answers a review."""
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "relmerge", *map(str, args)],
        input="".join(f"{key}\n" for key in keys),
        cwd=cwd or ROOT,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=300,
    )


def error_line(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit 2, nothing on stdout, and one stderr line ``error: …`` holding every fragment."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]
