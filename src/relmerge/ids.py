"""Stable ids of merged relations, compatible with the Heta reference step.

A merged relation's id depends only on its original input ids and its final name, so the
same merge gives the same id on every run; a relation that merges with nothing keeps its id.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

# The shape of every id ``merged_relation_id`` gives (salted or not).
_MERGED_SHAPE = re.compile(r"relation_[0-9a-f]{16}\Z")


def _hex16(payload: str) -> str:
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def merged_relation_id(member_ids: Iterable[str], name: str, salt: int = 0) -> str:
    """``relation_`` + 16 hex of sha256 over the final name and the sorted original ids.

    ``salt`` > 0 gives another id for the same merge: used only when an input relation
    already carries the computed id (an input may be crafted to, see ``free_merged_ids``).
    """
    lines = [name.strip(), *sorted(member_ids)]
    if salt:
        lines.append(f"#{salt}")
    return "relation_" + _hex16("\n".join(lines))


def has_merged_id_shape(relation_id: str) -> bool:
    """Whether ``relation_id`` could be one ``merged_relation_id`` computes: only an input
    id of this shape can collide with a merge's id."""
    return _MERGED_SHAPE.match(relation_id) is not None


def dedup_chunk_id(chunk_ids: Iterable[str]) -> str:
    """``dedup_`` + 16 hex of sha256 over the aggregated chunk ids (in input order)."""
    return "dedup_" + _hex16("\n".join(chunk_ids))
