"""The journal of a pass over a LightRAG graph: every edge it changes, before and after.

Written to ``OUT/lightrag/journal.json`` before the first edge is edited, so that a pass
killed at any point is finished (``applying``) or undone (``undoing``) by running the same
command; each edge done is appended to ``journal.done`` as it is done. A finished pass is
kept under ``OUT/lightrag/passes/`` when the next pass starts, so that ``relmerge lightrag
undo`` can take every pass back, the newest first.
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
from relmerge.integrations.lightrag.fields import EdgeFields

FOLDER = "lightrag"
JOURNAL = "journal.json"
PASSES = "passes"
APPLYING, APPLIED, UNDOING, UNDONE = "applying", "applied", "undoing", "undone"


@dataclass
class Change:
    """One edge of a pass: its fields before the pass and after it."""

    source: str
    target: str
    before: EdgeFields
    after: EdgeFields

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "before": self.before,
            "after": self.after,
        }


@dataclass
class Journal:
    """A pass's changes and where it stands; ``path`` is its file."""

    path: Path
    state: str
    changes: list[Change]
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def done_path(self) -> Path:
        return self.path.with_suffix(".done")

    def save(self, state: str) -> None:
        """Set the state (a fresh state starts with no edge done) and write the file."""
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
        """The changes already done in the current state (applied, or undone)."""
        if not self.done_path.is_file():
            return set()
        found: set[int] = set()
        for line in self.done_path.read_bytes().splitlines():
            try:
                found.add(int(orjson.loads(line)))
            except (orjson.JSONDecodeError, TypeError, ValueError):
                continue  # a line cut short by a kill: that edge is done again
        return found

    def mark(self, indices: Sequence[int]) -> None:
        """Record that these changes are done, durably (they are persisted)."""
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
            Change(str(c["source"]), str(c["target"]), dict(c["before"]), dict(c["after"]))
            for c in body["changes"]
        ]
        return Journal(path, str(body["state"]), changes, dict(body.get("info") or {}))
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as error:
        raise InputError(f"cannot read the LightRAG journal {path}: {error}") from None


def current(out: Path) -> Journal | None:
    """The journal of the latest pass into OUT, or None."""
    path = folder(out) / JOURNAL
    return _read(path) if path.is_file() else None


def archived(out: Path) -> list[Journal]:
    """The earlier passes into OUT, oldest first."""
    base = folder(out) / PASSES
    return [_read(path) for path in sorted(base.glob("*.json"))] if base.is_dir() else []


def every_pass(out: Path) -> Iterator[Journal]:
    """Every pass into OUT, the newest first."""
    latest = current(out)
    if latest is not None:
        yield latest
    yield from reversed(archived(out))


def start(out: Path, changes: Sequence[Change], info: dict[str, Any]) -> Journal:
    """Keep the previous pass (finished) under ``passes/`` and journal a new one."""
    previous = current(out)
    if previous is not None:  # finished: applied, or undone (``passes`` resumes the rest)
        base = folder(out) / PASSES
        base.mkdir(parents=True, exist_ok=True)
        number = len(list(base.glob("*.json"))) + 1
        previous.path.replace(base / f"{number:04d}.json")
        previous.done_path.unlink(missing_ok=True)
    journal = Journal(folder(out) / JOURNAL, APPLYING, list(changes), dict(info))
    journal.save(APPLYING)
    return journal
