"""Every command the CLI prints can be pasted back into a shell as printed: a path with
spaces, a URL with ``&`` or ``?``, stays one argument (a URL's ``&`` pasted unquoted sends
the command to the background)."""

from __future__ import annotations

import shlex
from pathlib import Path

from relmerge.data import sample_dir
from relmerge.review.queue import ReviewQueue
from tests.support.cli_process import piped, relmerge

SAMPLE = sample_dir()
CONTEXT = ("--entities", str(SAMPLE / "entities.jsonl"), "--embedding", "hash")


def after(text: str, start: str, end: str = "") -> list[str]:
    """The command printed between ``start`` and ``end`` on its line, as a shell splits it."""
    line = next(line for line in text.splitlines() if start in line)
    command = line.split(start, 1)[1]
    return shlex.split(command.split(end, 1)[0] if end else command)


def test_printed_commands_keep_spaces_and_ampersands_in_one_argument(tmp_path: Path) -> None:
    folder = tmp_path / "my graphs & more"
    folder.mkdir()
    url = f"sqlite:///{folder / 'g&1.db'}"
    assert relmerge("store", "init", url).returncode == 0

    merged = tmp_path / "merge out"
    done = relmerge(
        "merge-into", url, SAMPLE / "relations.jsonl", "-o", merged, "--llm", "none", *CONTEXT
    )
    assert done.returncode == 0, done.stderr
    assert after(done.stdout, "Answer them: ", "; then") == ["relmerge", "review", str(merged)]
    words = after(done.stdout, "all at once: ")
    assert words[:3] == ["relmerge", "reconcile", url]

    out = tmp_path / "rec 1 & 2"
    done = relmerge("reconcile", url, "--output", out, *CONTEXT)
    assert done.returncode == 0, done.stderr
    assert after(done.stdout, "Answer them: ", "; then") == ["relmerge", "review", str(out)]

    reviewed = piped("review", out, keys="mq")
    assert reviewed.returncode == 0, reviewed.stderr
    assert after(reviewed.stdout, "(or: ", ")") == ["relmerge", "review", str(out), "--apply"]
    rerun = next(line for line in reviewed.stdout.splitlines() if "relmerge reconcile" in line)
    words = shlex.split(rerun.split("&& ", 1)[-1])
    assert words[:3] == ["relmerge", "reconcile", url] and str(out) in words

    applied = piped("review", out, "--apply", keys="")
    assert applied.returncode == 0, applied.stderr
    words = after(applied.stdout, "applying: ")
    assert words[words.index("relmerge") :][:3] == ["relmerge", "reconcile", url]

    queue = ReviewQueue(out)
    for question in queue.pending():
        queue.answer(question["id"], "keep_both")
    assert piped("review", out, "--apply", keys="").returncode == 0
    nothing = piped("review", out, keys="")
    words = after(" ".join(nothing.stdout.split()), "Change one: ", ";")
    assert words == ["relmerge", "review", str(out), "--revise"], nothing.stdout
