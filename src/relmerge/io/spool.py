"""``JsonLines``: a log written chunk by chunk into a temporary file, stored at the end.

The decision log of a large batch outgrows everything else the run holds; kept as
objects until the end it was most of the run's memory. Lines go to disk as they are
made and reach the store in one piece when the run is done.
"""

from __future__ import annotations

import os
import tempfile
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

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


class ParkedBytes(Sequence[bytes]):
    """Byte strings parked in a temporary file as they come; only offsets stay in memory.

    The output relations of a million-record batch, held as bytes until the run returns,
    were the largest thing in memory; parked, they cost 16 bytes each. :meth:`ordered`
    gives them back in another order (the file closes with the last view of it).
    """

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="relmerge-out-")  # noqa: SIM115 (closed with the object)
        self._starts: array[int] = array("q")
        self._ends: array[int] = array("q")
        self._size = 0
        self._order: Sequence[int] | None = None

    def append(self, data: bytes) -> None:
        self._file.write(data)
        self._starts.append(self._size)
        self._size += len(data)
        self._ends.append(self._size)

    def close(self) -> None:
        self._file.close()

    def ordered(self, order: Sequence[int]) -> ParkedBytes:
        """The same bytes, the ``i``-th being the one appended ``order[i]``-th."""
        view = ParkedBytes.__new__(ParkedBytes)
        view._file, view._starts, view._ends, view._size = (
            self._file, self._starts, self._ends, self._size,
        )  # fmt: skip
        view._order = order
        return view

    def __len__(self) -> int:
        return len(self._order) if self._order is not None else len(self._starts)

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> list[bytes]: ...

    def __getitem__(self, index: int | slice) -> bytes | list[bytes]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        at = self._order[index] if self._order is not None else index
        self._file.flush()
        start = self._starts[at]
        return os.pread(self._file.fileno(), self._ends[at] - start, start)
