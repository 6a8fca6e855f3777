"""A directory on the local disk as an object store, with atomic writes."""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from relmerge.errors import StoreError
from relmerge.stores.base import validate_key, validate_prefix

_counter = itertools.count()
_WRITE_THREADS = 8


class LocalStore:
    """Keys are paths below ``root``; a write replaces an object through a temp file and
    ``os.replace``.

    The rename makes a write atomic against crashes of the process: a reader sees the old
    bytes or the new ones, never a prefix. :meth:`put_many` (a run's relation files)
    writes an object the store does not hold yet in place, which costs a third of the
    file-system work: a crash can then leave a new object cut short, but never one a
    reader had before, and the re-run that writes it again replaces it whole (a run's
    outputs are complete only once its result file, written with :meth:`put`, exists).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._made_dirs: set[Path] = set()

    def __repr__(self) -> str:
        return f"LocalStore({str(self.root)!r})"

    def path_of(self, key: str) -> Path:
        return self.root.joinpath(*validate_key(key).split("/"))

    async def get(self, key: str) -> bytes:
        path = self.path_of(key)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise StoreError(f"no object {key!r} in {self.root}") from None
        except OSError as error:
            raise StoreError(f"cannot read {key!r} in {self.root}: {error.strerror}") from None

    async def put(self, key: str, data: bytes) -> None:
        self._write(key, data)

    async def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Write many objects; a few threads overlap the file-system round trips, and the
        event loop goes on meanwhile. A new object is written in place, an existing one
        replaced atomically (see above).

        On a quiet disk one thread would be cheaper (creations in one directory are
        serialised by the kernel, and waiting threads spin: `bench/write_threads.py`), but
        where a creation waits on the disk, as after mass deletions on a disk mounted with
        ``discard``, the threads overlap the waits: a 1M-relation run with one thread
        waited 71 s for its last files, with eight 13–16 s."""
        for key, _ in items:
            validate_key(key)
        await asyncio.to_thread(self._put_many, items)

    def _put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        # Each thread writes a slice of its own: a future per file cost more than the file.
        threads = max(1, min(_WRITE_THREADS, len(items) // 16))
        with ThreadPoolExecutor(max_workers=threads) as pool:
            slices = [items[start::threads] for start in range(threads)]
            for future in [pool.submit(self._write_slice, part) for part in slices]:
                future.result()

    def _write_slice(self, items: Sequence[tuple[str, bytes]]) -> None:
        for key, data in items:
            self._write_new(key, data)

    async def put_parts(self, key: str, parts: Iterable[bytes]) -> None:
        """Write one object from ``parts`` as they come (a large log never sits in memory
        whole); atomic as :meth:`put`."""
        await asyncio.to_thread(self._write, key, parts)

    def _write_new(self, key: str, data: bytes) -> None:
        """Write ``key`` in place if the store does not hold it yet, else as :meth:`_write`."""
        path = self.path_of(key)
        try:
            self._make_parent(path)
            try:
                descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                self._write(key, data)
                return
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(descriptor, view) :]
            except BaseException:  # a full disk, say: no object cut short is left
                os.close(descriptor)
                path.unlink(missing_ok=True)
                raise
            os.close(descriptor)
        except OSError as error:
            raise StoreError(f"cannot write {key!r} in {self.root}: {error.strerror}") from None

    def _make_parent(self, path: Path) -> None:
        if path.parent not in self._made_dirs:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._made_dirs.add(path.parent)

    def _write(self, key: str, data: bytes | Iterable[bytes]) -> None:
        path = self.path_of(key)
        # One writer per key at a time within a process: pid + a counter make the temp
        # name unique without mkstemp's extra system calls.
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{next(_counter)}.tmp")
        try:
            self._make_parent(path)
            try:
                with open(tmp, "wb") as handle:
                    if isinstance(data, bytes | bytearray | memoryview):
                        handle.write(data)
                    else:
                        handle.writelines(data)
                os.replace(tmp, path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        except OSError as error:
            raise StoreError(f"cannot write {key!r} in {self.root}: {error.strerror}") from None

    async def exists(self, key: str) -> bool:
        return self.path_of(key).is_file()

    async def list(self, prefix: str = "") -> list[str]:
        validate_prefix(prefix)
        if not self.root.is_dir():
            return []
        keys = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames.sort()
            rel_dir = Path(dirpath).relative_to(self.root).as_posix()
            for filename in sorted(filenames):
                if filename.startswith(".") and filename.endswith(".tmp"):
                    continue  # an interrupted write, never a real object
                key = filename if rel_dir == "." else f"{rel_dir}/{filename}"
                if key.startswith(prefix):
                    keys.append(key)
        return sorted(keys)

    async def delete(self, key: str) -> None:
        self.path_of(key).unlink(missing_ok=True)

    async def remove_interrupted_writes(self, prefix: str = "") -> int:
        """Delete temp files that writers killed mid-write left under ``prefix``.

        Temp files of this process (writes still in progress) are kept.
        """
        validate_prefix(prefix)
        base = self.root / prefix if prefix else self.root
        base = base if base.is_dir() else base.parent
        mine = f".{os.getpid()}."
        removed = 0
        for path in base.rglob(".*.tmp") if base.is_dir() else ():
            if mine not in path.name and path.is_file():
                path.unlink(missing_ok=True)
                removed += 1
        return removed
