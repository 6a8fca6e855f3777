"""Gold labels: JSONL of ``{relation_id, cluster}``; same cluster = same fact. The
relations they label are ``relations.jsonl`` beside them (the dev set's layout)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def labelled_relations(gold_path: Path) -> list[dict[str, Any]]:
    """The relations a gold file labels: ``relations.jsonl`` in its folder, as dicts (for
    ``GoldJudge(records=...)``, which recognises records shown under other ids by them)."""
    path = gold_path.parent / "relations.jsonl"
    records: list[dict[str, Any]] = []
    for where, item in read_jsonl_items(path, "relations file"):
        if not isinstance(item, dict):
            raise InputError(f"{where}: expected a relation object")
        records.append(item)
    return records
