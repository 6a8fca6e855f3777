"""Writing the run's outputs into an object store.

Relation files first, then the logs; the manifest (result, keys, mapping) is written last
by :func:`write_manifest`, so a reader that finds the result file finds a complete run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import orjson

from relmerge.stores.base import ObjectStore

RESULT_FILE = "deduplicate_relations_result.json"
KEYS_FILE = "deduplicated_relation_keys.json"
MAPPING_FILE = "relation_id_mapping.json"
_CHUNK = 512


def relation_key(prefix: str, relation_id: str) -> str:
    return f"{prefix}/{relation_id}.json"


def jsonl(items: Iterable[Any]) -> bytes:
    return b"".join(orjson.dumps(item) + b"\n" for item in items)


async def write_files(
    store: ObjectStore,
    files: Sequence[tuple[str, bytes]],
    on_written: Callable[[int], None] = lambda n: None,
) -> None:
    """Put ``(key, bytes)`` files; stores with a ``put_many`` (the local disk) get them in
    chunks, written in parallel."""
    put_many = getattr(store, "put_many", None)
    for start in range(0, len(files), _CHUNK):
        chunk = files[start : start + _CHUNK]
        if put_many is not None:
            await put_many(chunk)
        else:
            for key, data in chunk:
                await store.put(key, data)
        on_written(len(chunk))


async def write_manifest(
    store: ObjectStore,
    result: dict[str, Any],
    keys: Sequence[str],
    mapping: dict[str, str],
) -> None:
    """Keys and mapping first, the result file last: its presence means "run complete"."""
    await store.put(KEYS_FILE, orjson.dumps(list(keys), option=orjson.OPT_INDENT_2))
    await store.put(MAPPING_FILE, orjson.dumps(mapping, option=orjson.OPT_INDENT_2))
    await store.put(RESULT_FILE, orjson.dumps(result, option=orjson.OPT_INDENT_2))
