"""Warnings on stderr about what a run set aside or would struggle with.

A rejected record is a recorded issue, not a failure (exit 0; ``--strict`` fails): but a
row in the summary table is easy to miss, and a record cut off mid-write is data the user
believes is in the graph. So the run says it on stderr too, even with ``--quiet``.
"""

from __future__ import annotations

from collections.abc import Sequence

from relmerge.io.records import Rejected

SHOWN_REASONS = 3
_REASON_CHARS = 200


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


def rejected_warning(rejected: Sequence[Rejected], where: str) -> list[str]:
    """``warning: N input records rejected, WHERE:`` and the first reasons, one a line,
    each with its ``file:line`` (or ``file:item N``, the object key) origin."""
    if not rejected:
        return []
    count = len(rejected)
    records = "record" if count == 1 else "records"
    lines = [f"warning: {count} input {records} rejected, {where}:"]
    lines += [f"  {item.origin}: {_short(item.reason)}" for item in rejected[:SHOWN_REASONS]]
    if count > SHOWN_REASONS:
        lines.append(f"  … and {count - SHOWN_REASONS} more")
    return lines
