"""``relmerge review OUT``: answer a run's pending clarifications, in the terminal or a browser."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from relmerge.cli.pipe import StdoutConsole
from relmerge.errors import InputError
from relmerge.review.queue import CLARIFICATIONS_FILE, ReviewQueue
from relmerge.review.render import question_panel

KEYS = "[m] merge   [k] keep both   [s] skip   [u] undo   [q] quit"


def _read_key() -> str:
    """One key press on a terminal; one line when input is piped (scripts, tests)."""
    if sys.stdin.isatty():
        return click.getchar().lower()
    line = sys.stdin.readline()
    return line.strip()[:1].lower() if line else "q"


def review_in_terminal(queue: ReviewQueue, console: Console) -> tuple[int, int]:
    """Ask every pending question; return (answered now, still pending)."""
    pending = queue.pending()
    history: list[str] = []
    index = 0
    while 0 <= index < len(pending):
        question = pending[index]
        left = sum(1 for q in pending if q["id"] not in queue.answers)
        console.print(question_panel(question, index + 1, len(pending), left))
        console.print(KEYS, markup=False)
        key = _read_key()
        if key == "m":
            queue.answer(question["id"], "merge")
            history.append(question["id"])
            console.print("→ merge", style="green")
            index += 1
        elif key == "k":
            queue.answer(question["id"], "keep_both")
            history.append(question["id"])
            console.print("→ keep both", style="green")
            index += 1
        elif key == "s":
            console.print("→ skipped")
            index += 1
        elif key == "u":
            if history:
                last = history.pop()
                queue.undo(last)
                index = next(i for i, q in enumerate(pending) if q["id"] == last)
                console.print("→ undone")
            else:
                console.print("nothing to undo")
        elif key in ("q", "\x03", "\x04"):
            break
        else:
            console.print(f"unknown key {key!r}")
    return len(history), len(queue.pending())


@click.command("review", short_help="Answer the pending clarifications of a run.")
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--web", is_flag=True, help="Serve a review page on 127.0.0.1 instead.")
@click.option("--port", type=int, default=8754, show_default=True, help="Port of --web.")
def review_command(out: Path, web: bool, port: int) -> None:
    """Answer the pending clarifications in OUT; `relmerge run ... --output OUT` again
    applies the answers (they are also remembered for later runs)."""
    if not (out / CLARIFICATIONS_FILE).is_file():
        raise InputError(f"no {CLARIFICATIONS_FILE} in {out}: run `relmerge run` into it first")
    queue = ReviewQueue(out)
    console = StdoutConsole()
    if web:
        from relmerge.review.web import serve

        serve(queue, port, console)
        return
    if not queue.pending():
        console.print(f"nothing to review in {out}: every question is answered")
        return
    answered, left = review_in_terminal(queue, console)
    console.print(f"{answered} answered, {left} pending. Apply them: relmerge run … --output {out}")
