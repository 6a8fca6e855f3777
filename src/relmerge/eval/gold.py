"""Gold labels: JSONL of ``{relation_id, cluster}``; same cluster = same fact."""

from __future__ import annotations

from pathlib import Path

from relmerge.errors import InputError
from relmerge.io.load import read_jsonl_items


def load_gold(path: Path) -> dict[str, str]:
    """Map relation id -> gold cluster; a malformed line is an error naming the line."""
    gold: dict[str, str] = {}
    for where, item in read_jsonl_items(path, "gold file"):
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("relation_id"), str)
            or not isinstance(item.get("cluster"), str)
        ):
            raise InputError(f"{where}: expected {{relation_id, cluster}} strings")
        gold[item["relation_id"]] = item["cluster"]
    if not gold:
        raise InputError(f"gold file {path} has no labels")
    return gold
