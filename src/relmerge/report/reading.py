"""Streaming readers for a run's files.

A decision log may hold 100k lines, so no JSONL file is loaded whole; a torn or foreign
line (a run killed mid-append, a hand edit) is counted and reported, never fatal.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

import orjson

from relmerge.errors import InputError, InvalidKeyError
from relmerge.io.load import read_input, read_jsonl
from relmerge.stores.base import validate_key

T = TypeVar("T")


class JsonlObjects:
    """The JSON objects of a JSONL file, one line at a time; ``bad`` counts skipped lines."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.bad = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        try:
            handle = self.path.open("rb")
        except OSError as error:
            raise InputError(f"cannot read {self.path}: {error.strerror}") from None
        with handle:
            for line in handle:
                if not line.strip():
                    continue
                try:
                    item = orjson.loads(line)
                except orjson.JSONDecodeError:
                    self.bad += 1
                    continue
                if isinstance(item, dict):
                    yield item
                else:
                    self.bad += 1


class Reservoir(Generic[T]):
    """A uniform sample of at most ``size`` items from a stream of unknown length."""

    def __init__(self, size: int, seed: int = 0) -> None:
        self.size = size
        self.seen = 0
        self.items: list[T] = []
        self._random = random.Random(seed)

    def add(self, item: T) -> None:
        self.seen += 1
        if len(self.items) < self.size:
            self.items.append(item)
            return
        slot = self._random.randrange(self.seen)
        if slot < self.size:
            self.items[slot] = item


def read_json(path: Path) -> Any | None:
    """A whole JSON file, or None when it is missing or unreadable."""
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None


def relation_file(out: Path, prefix: str, relation_id: str) -> dict[str, Any] | None:
    """An output relation, or None; ids come from the run's files, so they are checked as
    store keys before they become a path (no ``..`` escape from OUT)."""
    try:
        key = validate_key(f"{prefix}/{relation_id}.json")
    except InvalidKeyError:
        return None
    value = read_json(out / key)
    return value if isinstance(value, dict) else None


def input_records(path: Path, wanted: Collection[str]) -> dict[str, dict[str, Any]]:
    """The input records with the ``wanted`` relation ids (first occurrence of each).

    A JSONL file is streamed and left as soon as every id is found; a directory is read
    the way ``relmerge run`` reads it.
    """
    missing = set(wanted)
    found: dict[str, dict[str, Any]] = {}
    raws = read_jsonl(path) if path.is_file() else iter(asyncio.run(read_input(path)))
    for raw in raws:
        if not missing:
            break
        data = raw.data
        if isinstance(data, dict) and data.get("relation_id") in missing:
            relation_id = data["relation_id"]
            found[relation_id] = data
            missing.discard(relation_id)
    return found
