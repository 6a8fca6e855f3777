"""The journal of a pass over a Graphiti group: every edge and episode list it changes.

``OUT/graphiti/journal.json``, kept as every framework pass keeps its journal
(``integrations.pass_journal``: written before the first write, changes marked done once
written, earlier passes under ``passes/``, undone the newest first). An edge change
holds the edge's whole fields before and after (embedding included, dates as ISO
strings; ``after`` None: deleted), so undo recreates a deleted edge exactly; an episode
change holds its ``entity_edges`` before and after.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relmerge.integrations.pass_journal import (
    APPLIED,
    APPLYING,
    JOURNAL,
    UNDOING,
    UNDONE,
    JournalFolder,
)
from relmerge.integrations.pass_journal import Journal as PassJournal

FOLDER = "graphiti"
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

    @classmethod
    def from_dict(cls, item: dict[str, Any]) -> Change:
        return cls(str(item["kind"]), str(item["uuid"]), item["before"], item["after"])


Journal = PassJournal[Change]
JOURNALS = JournalFolder(FOLDER, "Graphiti", Change.from_dict)
folder = JOURNALS.folder
current = JOURNALS.current
every_pass = JOURNALS.every_pass
start = JOURNALS.start
to_undo = JOURNALS.to_undo

__all__ = [
    "APPLIED", "APPLYING", "EDGE", "EPISODE", "FOLDER", "JOURNAL", "UNDOING", "UNDONE",
    "Change", "Journal", "current", "every_pass", "folder", "start", "to_undo",
]  # fmt: skip
