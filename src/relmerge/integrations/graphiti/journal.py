"""The journal of a pass over a Graphiti group: every edge and episode list it changes.

Written to ``OUT/graphiti/journal.json`` before the first write, so that a pass killed at
any point is finished (``applying``) or undone (``undoing``) by calling the same function
again. An edge change holds the edge's whole fields before and after (embedding included,
dates as ISO strings; ``after`` None: deleted), so undo recreates a deleted edge exactly;
an episode change holds its ``entity_edges`` before and after. Changes done are appended
to ``journal.done`` in batches once written (writing one twice gives the same graph). A
finished pass is kept under ``OUT/graphiti/passes/`` when the next starts, so that undo
takes every pass back, the newest first.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from relmerge.adapters.common import write_atomic
from relmerge.errors import InputError

FOLDER = "graphiti"
JOURNAL = "journal.json"
PASSES = "passes"
APPLYING, APPLIED, UNDOING, UNDONE = "applying", "applied", "undoing", "undone"
EDGE, EPISODE = "edge", "episode"


@dataclass
class Change:
    """One object of a pass (``kind``: edge or episode), before and after it.

    Edge: whole fields (``after`` None: deleted). Episode: its ``entity_edges`` lists."""

    kind: str
    uuid: str
    before: Any
    after: Any

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "uuid": self.uuid, "before": self.before, "after": self.after}


@dataclass
class Journal:
    """A pass's changes (in write order) and where it stands; ``path`` is its file."""

    path: Path
    state: str
    changes: list[Change]
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def done_path(self) -> Path:
        return self.path.with_suffix(".done")

    def save(self, state: str) -> None:
        """Set the state (a fresh state starts with nothing done) and write the file."""
        self.state = state
        self.info[f"{state}_at"] = time.time()
        body = {
            "version": 1,
            "state": state,
            "info": self.info,
            "changes": [change.to_dict() for change in self.changes],
        }
        write_atomic(self.path, orjson.dumps(body, option=orjson.OPT_INDENT_2))
        self.done_path.unlink(missing_ok=True)

    def done(self) -> set[int]:
        """The changes already done in the current state."""
        if not self.done_path.is_file():
            return set()
        found: set[int] = set()
        for line in self.done_path.read_bytes().splitlines():
            try:
                found.add(int(orjson.loads(line)))
            except (orjson.JSONDecodeError, TypeError, ValueError):
                continue  # a line cut short by a kill: that change is done again
        return found

    def mark(self, indices: Sequence[int]) -> None:
        """Record that these changes are written, durably."""
        if not indices:
            return
        with self.done_path.open("ab") as handle:
            handle.write(b"".join(orjson.dumps(index) + b"\n" for index in indices))
            handle.flush()
            os.fsync(handle.fileno())


def folder(out: Path) -> Path:
    return out / FOLDER


def _read(path: Path) -> Journal:
    try:
        body = orjson.loads(path.read_bytes())
        changes = [
            Change(str(c["kind"]), str(c["uuid"]), c["before"], c["after"]) for c in body["changes"]
        ]
        return Journal(path, str(body["state"]), changes, dict(body.get("info") or {}))
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as error:
        raise InputError(f"cannot read the Graphiti journal {path}: {error}") from None


def current(out: Path) -> Journal | None:
    """The journal of the latest pass into OUT, or None."""
    path = folder(out) / JOURNAL
    return _read(path) if path.is_file() else None


def every_pass(out: Path) -> Iterator[Journal]:
    """Every pass into OUT, the newest first."""
    latest = current(out)
    if latest is not None:
        yield latest
    base = folder(out) / PASSES
    if base.is_dir():
        yield from (_read(path) for path in sorted(base.glob("*.json"), reverse=True))


def start(out: Path, changes: Sequence[Change], info: dict[str, Any]) -> Journal:
    """Keep the previous (finished) pass under ``passes/`` and journal a new one."""
    previous = current(out)
    if previous is not None:
        base = folder(out) / PASSES
        base.mkdir(parents=True, exist_ok=True)
        number = len(list(base.glob("*.json"))) + 1
        previous.path.replace(base / f"{number:04d}.json")
        previous.done_path.unlink(missing_ok=True)
    journal = Journal(folder(out) / JOURNAL, APPLYING, list(changes), dict(info))
    journal.save(APPLYING)
    return journal
