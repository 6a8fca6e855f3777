"""Standard output closed early (``relmerge import … | head -1``): end quietly.

The reader that went away asked for no more, so this is no error of relmerge's: no
message, no traceback, and the exit status a shell gives any command cut off this way.
"""

from __future__ import annotations

import io
import os
import select
import sys
from typing import NoReturn

from rich.console import Console

# 128 + SIGPIPE (13): what a shell reports for a command ended by a closed pipe (`yes | head
# -1` under `set -o pipefail`), the family of relmerge's 130 / 143 for Ctrl-C / SIGTERM.
# Python, click and rich exit 1 here instead, but 1 is relmerge's "internal error" and 2
# its "bad input": a script must be able to tell a cut-off listing from either.
BROKEN_PIPE_EXIT = 141


def stdout_gone() -> bool:
    """Whether standard output is a pipe whose reader has gone.

    A ``BrokenPipeError`` may also come from a socket or a helper process's pipe: that one
    is a failure to report, not a reader that had enough. Where ``poll`` is missing
    (Windows) the error is taken to be standard output's.
    """
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return False
    if not hasattr(select, "poll"):
        return True
    poller = select.poll()
    poller.register(descriptor, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def exit_broken_pipe() -> NoReturn:
    """Point standard output at the null device and exit :data:`BROKEN_PIPE_EXIT`.

    Python flushes standard output once more on the way out; into /dev/null that flush
    cannot fail again ("Exception ignored … BrokenPipeError").
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        pass
    sys.exit(BROKEN_PIPE_EXIT)


class StdoutConsole(Console):
    """A rich console on standard output whose broken pipe reaches the command group
    (rich would exit 1 by itself)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError("standard output closed")
