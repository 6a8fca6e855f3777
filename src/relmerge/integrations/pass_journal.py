"""The journal of a pass over a framework's graph: every change, before and after.

A pass (LightRAG's, Graphiti's) writes ``OUT/<framework>/journal.json`` before it changes
anything, so that a pass killed at any point is finished (``applying``) or undone
(``undoing``) by running the same command. The changes done are appended to
``journal.done`` in batches, once what they wrote is persisted (writing a change twice
gives the same graph). A finished pass is kept under ``OUT/<framework>/passes/`` when the
next one starts, so that undo takes every pass back, the newest first. What a change
holds is the framework's own (:class:`JournalFolder` reads it back).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import orjson

from relmerge.adapters.common import write_atomic
from relmerge.errors import InputError

JOURNAL = "journal.json"
PASSES = "passes"
APPLYING, APPLIED, UNDOING, UNDONE = "applying", "applied", "undoing", "undone"


class ChangeLike(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


C = TypeVar("C", bound=ChangeLike)


@dataclass
class Journal(Generic[C]):
    """A pass's changes (in write order) and where it stands; ``path`` is its file."""

    path: Path
    state: str
    changes: list[C]
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
        """The changes already done in the current state (applied, or undone)."""
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
        """Record that these changes are done, durably (what they wrote is persisted)."""
        if not indices:
            return
        with self.done_path.open("ab") as handle:
            handle.write(b"".join(orjson.dumps(index) + b"\n" for index in indices))
            handle.flush()
            os.fsync(handle.fileno())


@dataclass(frozen=True)
class JournalFolder(Generic[C]):
    """Where one framework's passes keep their journals (``OUT/<name>/``), and how a
    change is read back (``parse``; ``title`` names the framework in messages)."""

    name: str
    title: str
    parse: Callable[[dict[str, Any]], C]

    def folder(self, out: Path) -> Path:
        return out / self.name

    def _read(self, path: Path) -> Journal[C]:
        try:
            body = orjson.loads(path.read_bytes())
            changes = [self.parse(dict(change)) for change in body["changes"]]
            return Journal(path, str(body["state"]), changes, dict(body.get("info") or {}))
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError) as error:
            raise InputError(f"cannot read the {self.title} journal {path}: {error}") from None

    def current(self, out: Path) -> Journal[C] | None:
        """The journal of the latest pass into OUT, or None."""
        path = self.folder(out) / JOURNAL
        return self._read(path) if path.is_file() else None

    def every_pass(self, out: Path) -> Iterator[Journal[C]]:
        """Every pass into OUT, the newest first."""
        latest = self.current(out)
        if latest is not None:
            yield latest
        base = self.folder(out) / PASSES
        if base.is_dir():
            yield from (self._read(path) for path in sorted(base.glob("*.json"), reverse=True))

    def to_undo(self, out: Path) -> list[Journal[C]]:
        """The passes into OUT not undone yet, the newest first (an error when OUT holds
        no pass at all)."""
        entries = list(self.every_pass(out))
        if not entries:
            raise InputError(f"{out} holds no {self.title} pass to undo (no {self.name}/{JOURNAL})")
        return [entry for entry in entries if entry.state != UNDONE]

    def start(self, out: Path, changes: Sequence[C], info: dict[str, Any]) -> Journal[C]:
        """Keep the previous pass (finished: applied, or undone) under ``passes/`` and
        journal a new one."""
        previous = self.current(out)
        if previous is not None:
            base = self.folder(out) / PASSES
            base.mkdir(parents=True, exist_ok=True)
            number = len(list(base.glob("*.json"))) + 1
            previous.path.replace(base / f"{number:04d}.json")
            previous.done_path.unlink(missing_ok=True)
        journal = Journal(self.folder(out) / JOURNAL, APPLYING, list(changes), dict(info))
        journal.save(APPLYING)
        return journal
