"""Ctrl-C and SIGTERM during a command: stop at once, keep what arrived, say how to resume.

:func:`run_interruptible` runs a command's coroutine on its own event loop with SIGINT and
SIGTERM cancelling it, as ``asyncio.run`` does for SIGINT alone: nothing more is sent, the
``finally`` blocks run, and every answer already received is in the cache (it is committed
as it arrives). :func:`exit_interrupted` then ends the helper processes (the embedding
helper, a Ray started here) and leaves without waiting for threads still busy on work that
will not be used (an embedding batch): the output lacks its result file, the "complete"
marker written last, so the same command resumes it.

The event loop only sees the cancellation at its next turn, and a stretch of CPU work
(reading a large input, the features of a large chunk) can hold it for seconds: if the
unwinding has not finished ``GRACE_SECONDS`` after the signal, the command ends the
helpers and leaves from a watchdog thread, as a kill would but with the same message and
status (the cache is an SQLite file: committed answers survive any exit). A second signal
exits at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Coroutine
from types import FrameType
from typing import Any, NoReturn, TypeVar

import click

T = TypeVar("T")

RESUME_HINT = "interrupted — run the same command again to resume"
GRACE_SECONDS = 1.0
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(Exception):
    """The command was stopped by a signal; ``exit_code`` is 128 + its number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def run_interruptible(
    main: Coroutine[Any, Any, T], message: str = RESUME_HINT, grace: float = GRACE_SECONDS
) -> T:
    """Run ``main`` to completion; on SIGINT or SIGTERM cancel it and raise
    :class:`Interrupted` once it has unwound, or, past ``grace`` seconds, print
    ``message`` and exit from a watchdog thread. Outside the main thread signals cannot be
    caught, and ``main`` simply runs."""
    loop = asyncio.new_event_loop()
    task = loop.create_task(main)
    received: list[int] = []
    watchdog: list[threading.Timer] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if received:  # a second Ctrl-C: the user does not want to wait for the unwinding
            _leave(128 + received[0])
        received.append(signum)
        task.cancel()
        loop.call_soon_threadsafe(lambda: None)  # wake the loop if it is waiting
        timer = threading.Timer(grace, _overrun, (signum, message))
        timer.daemon = True
        timer.start()
        watchdog.append(timer)

    previous: dict[signal.Signals, Any] = {}
    try:
        for number in _SIGNALS:
            previous[number] = signal.signal(number, on_signal)
    except ValueError:  # not the main thread
        previous.clear()
    try:
        return loop.run_until_complete(task)
    except asyncio.CancelledError:
        if received:
            raise Interrupted(received[0]) from None
        raise
    finally:
        for timer in watchdog:  # unwound in time: the caller finishes the exit itself
            timer.cancel()
        for number, handler in previous.items():
            signal.signal(number, handler)
        try:
            _cancel_all(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            if not received:  # after an interrupt, busy threads are not waited for
                loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


def stop_helpers() -> None:
    """End what the command started besides its own process: embedding helper processes,
    local worker processes and a Ray runtime (its workers and actors)."""
    from relmerge.providers.use_embed import stop_helpers as stop_embedding_helpers

    stop_embedding_helpers()
    _stop_workers()
    _stop_ray()


def _stop_workers() -> None:
    module = sys.modules.get("relmerge.engines.processes")
    if module is not None:
        module.stop_workers()


def _stop_ray() -> None:
    """Shut down a Ray runtime this process joined or started (its local processes)."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def _overrun(signum: int, message: str) -> None:
    """The watchdog: the work did not unwind in time (the loop is busy on CPU work)."""
    from relmerge.providers.use_embed import stop_helpers as stop_embedding_helpers

    stop_embedding_helpers()
    _stop_workers()
    _stop_ray()  # its agents would outlive this process
    click.echo(message, err=True)
    _leave(128 + signum)


def exit_interrupted(error: Interrupted, message: str = RESUME_HINT) -> NoReturn:
    """Print ``message`` and exit with 130 (SIGINT) or 143 (SIGTERM), now."""
    stop_helpers()
    click.echo(message, err=True)
    _leave(error.exit_code)


def _leave(code: int) -> NoReturn:
    """Exit without joining worker threads: one may be busy for seconds on a batch whose
    result nobody will read. Everything worth keeping is already committed."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
