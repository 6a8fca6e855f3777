"""Clarifiers: who answers an unsure question — an app callback, a terminal, or later.

A clarifier returns ``"merge"``, ``"keep_both"``, or ``None`` for "no answer now"; on
``None`` the policy decides and the question stays pending in the review queue (if any).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import click
from rich.console import Console

from relmerge.review.memory import Answer
from relmerge.review.queue import ReviewQueue
from relmerge.review.render import question_panel


class Clarifier(Protocol):
    async def ask(self, question: dict[str, Any]) -> Answer | None: ...


class QueueClarifier:
    """Store the question for later (``relmerge review``); answer nothing now."""

    def __init__(self, queue: ReviewQueue) -> None:
        self.queue = queue

    async def ask(self, question: dict[str, Any]) -> Answer | None:
        self.queue.add(question)
        return None


class CallbackClarifier:
    """Ask an app's async callback; past ``timeout`` seconds the policy answers instead and
    the question is kept pending in ``queue`` (when given) for a later answer."""

    def __init__(
        self,
        callback: Callable[[dict[str, Any]], Awaitable[str | None]],
        timeout: float = 30.0,
        queue: ReviewQueue | None = None,
    ) -> None:
        self.callback = callback
        self.timeout = timeout
        self.queue = queue

    async def ask(self, question: dict[str, Any]) -> Answer | None:
        try:
            answer = await asyncio.wait_for(self.callback(question), self.timeout)
        except TimeoutError:
            answer = None
        if answer == "merge":
            return "merge"
        if answer == "keep_both":
            return "keep_both"
        if self.queue is not None:
            self.queue.add(question)
        return None


class TerminalClarifier:
    """Ask the person at the terminal: ``m`` merge, ``k`` keep both, anything else skips."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)

    def _ask(self, question: dict[str, Any]) -> Answer | None:
        self.console.print(question_panel(question, 1, 1, 1))
        self.console.print("[m] merge   [k] keep both   [s] skip", markup=False)
        if sys.stdin.isatty():
            key = click.getchar().lower()
        else:
            key = (sys.stdin.readline().strip() or "s")[:1].lower()
        return "merge" if key == "m" else "keep_both" if key == "k" else None

    async def ask(self, question: dict[str, Any]) -> Answer | None:
        return await asyncio.to_thread(self._ask, question)
