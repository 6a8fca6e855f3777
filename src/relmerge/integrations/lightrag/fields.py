"""The fields of a LightRAG edge that a pass may change, and how two versions combine.

LightRAG's edit call (``aedit_relation``) sets ``description``, ``keywords``,
``source_id``, ``file_path`` and ``weight``; a journal keeps exactly these, before and
after, so that a pass can be undone or resumed. Between a pass and its undo LightRAG may
have inserted more documents, which append fragments, chunk ids and weight to an edge:
:func:`rebase` keeps what was added since while restoring the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relmerge.adapters.common import ordered_union
from relmerge.integrations.lightrag.records import SEP, split_field

EDIT_FIELDS = ("description", "keywords", "source_id", "file_path", "weight")
_LISTS = ("description", "source_id", "file_path")

EdgeFields = dict[str, Any]


def edit_fields(data: Mapping[str, Any]) -> EdgeFields:
    """The editable fields of an edge's data, as LightRAG stores them."""
    fields: EdgeFields = {}
    for name in EDIT_FIELDS:
        if name in data and data[name] is not None:
            value = data[name]
            fields[name] = _number(value) if name == "weight" else str(value)
    return fields


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 1.0


def same(one: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    """Whether two versions agree on every editable field (weights as numbers)."""
    return edit_fields(one) == edit_fields(other)


def rebase(target: EdgeFields, base: EdgeFields, current: Mapping[str, Any]) -> EdgeFields:
    """``target``, plus what the edge gained since it was ``base``: fragments, chunk ids
    and file paths that are in ``current`` and in neither; the weight added since; the
    keywords of ``current`` when they changed. ``current == base`` gives ``target``."""
    now = edit_fields(current)
    if now == edit_fields(base):
        return dict(target)
    rebased = dict(target)
    for name in _LISTS:
        known = set(split_field(base.get(name))) | set(split_field(target.get(name)))
        added = [part for part in split_field(now.get(name)) if part not in known]
        if added:
            rebased[name] = SEP.join(ordered_union([split_field(target.get(name)), added]))
    gained = _number(now.get("weight", 0.0)) - _number(base.get("weight", 0.0))
    if gained > 0 and "weight" in target:
        rebased["weight"] = _number(target["weight"]) + gained
    if now.get("keywords") != base.get("keywords") and "keywords" in now:
        rebased["keywords"] = now["keywords"]
    return rebased
