"""The journal of a pass over a LightRAG graph: every edge it changes, before and after.

``OUT/lightrag/journal.json``, kept as every framework pass keeps its journal
(``integrations.pass_journal``: written before the first edit, changes marked done once
persisted, earlier passes under ``passes/``). A change is one edge: its editable fields
before the pass and after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relmerge.integrations.lightrag.fields import EdgeFields
from relmerge.integrations.pass_journal import (
    APPLIED,
    APPLYING,
    JOURNAL,
    UNDOING,
    UNDONE,
    JournalFolder,
)
from relmerge.integrations.pass_journal import Journal as PassJournal

FOLDER = "lightrag"


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

    @classmethod
    def from_dict(cls, item: dict[str, Any]) -> Change:
        return cls(
            str(item["source"]), str(item["target"]), dict(item["before"]), dict(item["after"])
        )


Journal = PassJournal[Change]
JOURNALS = JournalFolder(FOLDER, "LightRAG", Change.from_dict)
folder = JOURNALS.folder
current = JOURNALS.current
every_pass = JOURNALS.every_pass
start = JOURNALS.start
to_undo = JOURNALS.to_undo

__all__ = [
    "APPLIED", "APPLYING", "FOLDER", "JOURNAL", "UNDOING", "UNDONE", "Change", "Journal",
    "current", "every_pass", "folder", "start", "to_undo",
]  # fmt: skip
