"""``JsonLines``: a log written chunk by chunk into a temporary file, stored at the end.

The decision log of a large batch outgrows everything else the run holds; kept as
objects until the end it was most of the run's memory. Lines go to disk as they are
made and reach the store in one piece when the run is done.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from typing import Any

import orjson

from relmerge.stores.base import ObjectStore


class JsonLines:
    """Append JSON lines; :meth:`put` copies them all to one store key."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="relmerge-log-")  # noqa: SIM115 (closed by close())
        self.count = 0

    def extend(self, items: Iterable[Any]) -> None:
        for item in items:
            self._file.write(orjson.dumps(item) + b"\n")
            self.count += 1

    def read(self) -> bytes:
        self._file.flush()
        self._file.seek(0)
        data = self._file.read()
        self._file.seek(0, 2)
        return data

    async def put(self, store: ObjectStore, key: str, *more: JsonLines) -> None:
        """Store these lines, then those of ``more``, under ``key``."""
        await store.put(key, b"".join(part.read() for part in (self, *more)))

    def close(self) -> None:
        self._file.close()
