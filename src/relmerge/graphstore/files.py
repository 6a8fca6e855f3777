"""Relations between a store and files: a graph read for ``load``, a dump written whole.

A load reads INPUT as ``relmerge run`` does (:func:`relmerge.io.load.stream_input`, a
local JSONL file streaming) and checks each record with the same
:class:`~relmerge.io.records.RecordChecker`: a bad record is set aside with its reason,
never stored. A ``relmerge run`` output folder is read through its
``deduplicated_relation_keys.json``, in the order the run wrote it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path

from relmerge.errors import ExportError
from relmerge.graphstore.base import Progress, RelationStore
from relmerge.io.load import parse_key_list, read_store_keys, stream_input
from relmerge.io.records import RawRecord, RecordChecker, Rejected
from relmerge.io.write import KEYS_FILE
from relmerge.model import ExtractedRelation
from relmerge.stores import local_path
from relmerge.stores.local import LocalStore


async def read_graph(location: str) -> Iterable[RawRecord]:
    """The records of INPUT: a file, a folder of relation JSON, a run's output folder,
    or the same in an object store (URL)."""
    local = local_path(location)
    if local is not None and (local / KEYS_FILE).is_file():
        keys = parse_key_list((local / KEYS_FILE).read_bytes(), str(local / KEYS_FILE))
        return await read_store_keys(LocalStore(local), keys)
    return await stream_input(location)


@dataclass
class CheckedRecords:
    """The valid relations of ``records`` as they are iterated; ``rejected`` fills as it
    goes. ``bytes_read`` / ``total_bytes`` where the input streams from a file."""

    records: Iterable[RawRecord]
    rejected: list[Rejected] = field(default_factory=list)
    read: int = 0

    def __iter__(self) -> Iterator[ExtractedRelation]:
        checker = RecordChecker()
        for raw in self.records:
            self.read += 1
            checked = checker.check(raw)
            if isinstance(checked, Rejected):
                self.rejected.append(checked)
            else:
                yield checked


async def dump_to_file(store: RelationStore, path: Path, progress: Progress | None = None) -> int:
    """Write every stored relation as JSONL to ``path``, whole or not at all (a temporary
    file beside it, renamed over it once complete). Returns how many were written."""
    if path.is_dir():
        raise ExportError(f"{path} is a folder: give the dump a file name (OUT.jsonl)")
    parent = path.parent if str(path.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ExportError(f"cannot write {path}: {error.strerror}") from None
    # A name of this process's own (as LocalStore does): created with the usual umask.
    name = parent / f".{path.name}.{os.getpid()}.tmp"
    written = 0
    try:
        with open(name, "wb") as handle:
            async with aclosing(store.dump(progress)) as relations:
                async for relation in relations:
                    handle.write(relation.to_json() + b"\n")
                    written += 1
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(name, path)
    except BaseException as error:
        name.unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise ExportError(f"cannot write {path}: {error.strerror}") from None
        raise
    return written
