"""The terminal review: one question at a time, one key press per answer.

Every answer is saved as it is given (``ReviewQueue.answer``), so Ctrl-C loses nothing but
the question on screen. With ``revise`` the questions already answered come too, with
their current answer: a new one replaces it, ``f`` forgets it (the next run asks again),
and ``u`` puts back whatever was there before.
"""

from __future__ import annotations

import sys

import click
from rich.console import Console

from relmerge.review.memory import Answer
from relmerge.review.queue import ReviewQueue
from relmerge.review.render import question_panel

KEYS = "[m] merge   [k] keep both   [s] skip   [u] undo   [q] quit"
REVISE_KEYS = "[m] merge   [k] keep both   [f] forget   [s] skip   [u] undo   [q] quit"
_SAID = {"merge": "→ merge", "keep_both": "→ keep both"}


def read_key() -> str:
    """One key press on a terminal; one line when input is piped (scripts, tests). Ctrl-C
    raises KeyboardInterrupt; Ctrl-D, or the end of piped input, quits."""
    if sys.stdin.isatty():
        try:
            return click.getchar().lower()
        except EOFError:
            return "q"
    line = sys.stdin.readline()
    return line.strip()[:1].lower() if line else "q"


class TerminalReview:
    """Goes through ``questions`` of ``queue``; ``history`` holds what was changed (the
    question's id, the answer it had before and when that was given), for undo."""

    def __init__(self, queue: ReviewQueue, console: Console, revise: bool = False) -> None:
        self.queue = queue
        self.console = console
        self.revise = revise
        self.questions = queue.to_review(revise)
        self.history: list[tuple[str, Answer | None, float | None]] = []

    def run(self) -> None:
        index = 0
        while 0 <= index < len(self.questions):
            question = self.questions[index]
            current = self.queue.answers.get(question["id"])
            left = sum(1 for q in self.questions if q["id"] not in self.queue.answers)
            self.console.print(
                question_panel(
                    question,
                    index + 1,
                    len(self.questions),
                    left,
                    current if self.revise else None,
                )
            )
            self.console.print(REVISE_KEYS if self.revise else KEYS, markup=False)
            key = read_key()
            if key in ("m", "k"):
                answer: Answer = "merge" if key == "m" else "keep_both"
                self._keep(question["id"], current)
                self.queue.answer(question["id"], answer)
                self.console.print(_SAID[answer], style="green")
                index += 1
            elif key == "f" and self.revise:
                if current is not None:
                    self._keep(question["id"], current)
                    self.queue.undo(question["id"])
                    self.console.print("→ forgotten: the next run asks it again")
                else:
                    self.console.print("→ no answer to forget")
                index += 1
            elif key == "s":
                self.console.print("→ skipped")
                index += 1
            elif key == "u":
                index = self._undo(index)
            elif key == "q":
                break
            else:
                self.console.print(f"unknown key {key!r}")

    def _keep(self, question_id: str, current: Answer | None) -> None:
        at = self.queue.answered_at.get(question_id, 0.0) if current is not None else None
        self.history.append((question_id, current, at))

    def _undo(self, index: int) -> int:
        if not self.history:
            self.console.print("nothing to undo")
            return index
        question_id, before, at = self.history.pop()
        if before is None:
            self.queue.undo(question_id)
        else:
            self.queue.answer(question_id, before, at)
        self.console.print("→ undone")
        return next(i for i, q in enumerate(self.questions) if q["id"] == question_id)
