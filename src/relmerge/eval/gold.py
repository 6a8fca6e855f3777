"""Gold labels: JSONL of ``{relation_id, cluster}``; same cluster = same fact."""

from __future__ import annotations

from pathlib import Path

import orjson

from relmerge.errors import InputError


def load_gold(path: Path) -> dict[str, str]:
    """Map relation id -> gold cluster; a malformed line is an error naming the line."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError as error:
        raise InputError(f"cannot read gold file {path}: {error.strerror}") from None
    gold: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise InputError(f"{path}:{number}: not valid JSON") from None
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("relation_id"), str)
            or not isinstance(item.get("cluster"), str)
        ):
            raise InputError(f"{path}:{number}: expected {{relation_id, cluster}} strings")
        gold[item["relation_id"]] = item["cluster"]
    if not gold:
        raise InputError(f"gold file {path} has no labels")
    return gold
