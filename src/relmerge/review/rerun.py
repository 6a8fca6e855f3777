"""The command that made OUT, recorded so that applying review answers is one short step.

``relmerge run`` records the arguments it was started with and its working directory in
``OUT/.relmerge/run.json``; ``relmerge review`` prints them ready to paste and offers to
run them (``--apply``). Secrets never reach the file: ``--storage-option`` values, a
URL's ``user:password@`` and its token-like query parameters are replaced by ``<hidden>``
(a command with hidden values is printed to be completed by hand, never run). API keys
are named by their environment variable only, and the re-run inherits the environment.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from relmerge.io.outdir import RUN_MARKER
from relmerge.io.write import RESULT_FILE

HIDDEN = "<hidden>"
RECONCILE_RESULT = "reconcile_result.json"  # what ``relmerge reconcile`` writes last
# The commands that write an OUT, as a person would type them again (``…``: its options).
_TEMPLATES = {
    "run": ("run", "INPUT"),
    "merge-into": ("merge-into", "URL", "INPUT"),
    "reconcile": ("reconcile", "URL"),
    "demo": ("demo",),
    "lightrag": ("lightrag", "dedupe", "WORKING_DIR"),
    "graphiti": ("graphiti", "dedupe", "URL"),
}
# ``click.Context.meta`` key of the arguments after ``relmerge``, as typed (``relmerge.cli``
# puts them there, ``relmerge run`` records them).
ARGV_META = "relmerge.argv"
_SECRET_OPTIONS = ("--storage-option",)
_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")
# A database URL's user alone is a name, not a secret (peer or trust authentication, a
# password from the environment): only its password is hidden.
_DATABASE_USER = re.compile(r"^(postgres(?:ql)?(?:\+\w+)?://)([^/@:\s]+)@")
_SECRET_QUERY = re.compile(
    r"(?i)([?&][^=&#]*(?:key|token|secret|password|passwd|signature|sig|credential)[^=&#]*=)"
    r"[^&#]*"
)


def _redact_text(value: str) -> str:
    if "://" not in value:
        return value
    user = _DATABASE_USER.match(value)
    if user is not None:
        value = value[user.end() :]
    value = _USERINFO.sub(HIDDEN + "@", value)
    if user is not None:
        value = user.group(0) + value
    return _SECRET_QUERY.sub(lambda m: m.group(1) + HIDDEN, value)


def redact_argv(argv: Sequence[str]) -> tuple[list[str], bool]:
    """``argv`` with secret values replaced by ``<hidden>``; whether any was."""
    shown: list[str] = []
    hidden = False
    secret_next = False
    for arg in argv:
        if secret_next:
            key, sep, _ = arg.partition("=")
            shown.append(f"{key}={HIDDEN}" if sep else HIDDEN)
            hidden, secret_next = True, False
            continue
        name, sep, value = arg.partition("=")
        if name in _SECRET_OPTIONS:
            if sep:
                key, inner, _ = value.partition("=")
                shown.append(f"{name}={key}={HIDDEN}" if inner else f"{name}={HIDDEN}")
                hidden = True
            else:
                shown.append(arg)
                secret_next = True
            continue
        redacted = _redact_text(arg)
        hidden = hidden or redacted != arg
        shown.append(redacted)
    return shown, hidden


def record(argv: Sequence[str], cwd: str) -> dict[str, Any]:
    """What ``run.json`` keeps of a command line (``argv``: the arguments after
    ``relmerge``)."""
    shown, hidden = redact_argv(argv)
    return {"argv": shown, "cwd": cwd, "hidden": hidden}


@dataclass(frozen=True)
class RunCommand:
    """A recorded ``relmerge …`` command: its arguments, where it ran, what it hides."""

    argv: list[str]
    cwd: str
    hidden: bool

    def shell(self) -> str:
        """The command ready to paste (with a ``cd`` when it ran elsewhere)."""
        line = shlex.join(["relmerge", *self.argv])
        return line if self.cwd == os.getcwd() else f"cd {shlex.quote(self.cwd)} && {line}"

    def run(self) -> int:
        """Run it again with this Python (``python -m relmerge``); its exit status. Ctrl-C
        is the child's to handle (it saves what it has and exits 130); this process waits
        for it."""
        try:
            previous = signal.signal(signal.SIGINT, _wait_for_child)
        except ValueError:  # not the main thread
            previous = None
        try:
            done = subprocess.run([sys.executable, "-m", "relmerge", *self.argv], cwd=self.cwd)
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        return done.returncode


def _wait_for_child(signum: int, frame: object) -> None:
    """Ctrl-C reaches the child too; this process keeps waiting for its exit status. (A
    handler rather than SIG_IGN: an ignored signal would stay ignored in the child.)"""


def run_record(out: Path) -> dict[str, Any]:
    """``OUT/.relmerge/run.json`` as a dict (empty when missing or unreadable)."""
    try:
        value = orjson.loads((out / RUN_MARKER).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def recorded_command(out: Path) -> RunCommand | None:
    """The command that made OUT, or None (an OUT from before commands were recorded, or
    made through the Python API)."""
    command = run_record(out).get("command")
    if not isinstance(command, dict):
        return None
    argv, cwd = command.get("argv"), command.get("cwd")
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return None
    if not isinstance(cwd, str):
        return None
    return RunCommand(list(argv), cwd, bool(command.get("hidden", True)))


def run_started_at(out: Path) -> float | None:
    """When the last run into OUT started (its answers were read then), or None."""
    started = run_record(out).get("started_at")
    if isinstance(started, int | float):
        return float(started)
    marker = out / RUN_MARKER
    return marker.stat().st_mtime if marker.is_file() else None


def relmerge_line(*args: str | Path) -> str:
    """``relmerge ARGS`` as a shell reads it back: a URL with ``&`` or ``?``, a path with
    spaces, pasted as printed, stays one argument."""
    return shlex.join(["relmerge", *map(str, args)])


def made_by(out: Path) -> str:
    """The relmerge command that made OUT (``run``, ``merge-into``, ``reconcile``, ``demo``,
    ``lightrag``): the recorded one, else what its files say, so that a hint names the
    right command."""
    command = recorded_command(out)
    if command is not None and command.argv and command.argv[0] in _TEMPLATES:
        return command.argv[0]
    if (out / RECONCILE_RESULT).is_file():
        return "reconcile"
    result = _result(out)
    return "merge-into" if isinstance(result.get("store"), dict) else "run"


def _result(out: Path) -> dict[str, Any]:
    try:
        value = orjson.loads((out / RESULT_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def command_outline(out: Path, name: str | None = None) -> str:
    """``relmerge reconcile URL --output OUT …``: the command that made OUT (or ``name``),
    its arguments as words to fill in, OUT quoted for a shell."""
    words = _TEMPLATES.get(name or made_by(out), _TEMPLATES["run"])
    return f"{shlex.join(['relmerge', *words, '--output', str(out)])} …"
