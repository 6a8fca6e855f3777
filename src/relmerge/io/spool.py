"""``JsonLines``: a log written chunk by chunk into a temporary file, stored at the end.

The decision log of a large batch outgrows everything else the run holds; kept as
objects until the end it was most of the run's memory. Lines go to disk as they are
made and reach the store in one piece when the run is done.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator
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

    def parts(self, size: int = 1 << 20) -> Iterator[bytes]:
        """The lines written so far, in pieces of about ``size`` bytes."""
        self._file.flush()
        self._file.seek(0)
        while piece := self._file.read(size):
            yield piece
        self._file.seek(0, 2)

    async def put(self, store: ObjectStore, key: str, *more: JsonLines) -> None:
        """Store these lines, then those of ``more``, under ``key``; streamed where the
        store can take an object in parts (the local disk, fsspec URLs)."""
        parts = (piece for log in (self, *more) for piece in log.parts())
        put_parts = getattr(store, "put_parts", None)
        if put_parts is not None:
            await put_parts(key, parts)
        else:
            await store.put(key, b"".join(parts))

    def close(self) -> None:
        self._file.close()
