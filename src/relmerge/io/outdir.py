"""Rules for an output directory reused across runs (DESIGN §7).

A run records a fingerprint of its inputs and configuration in its result. Running again
into the same OUT with the same fingerprint is allowed (it redoes or resumes the same work);
with another fingerprint relmerge refuses unless told to overwrite. The fingerprint is
recorded before anything is written and the old result file removed, so a half-written run
never looks complete and a killed run can be resumed; relation files of an earlier run that
the new run does not produce are removed at the end.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence, Sized
from typing import Any

import orjson

from relmerge.errors import InputError, StoreError
from relmerge.io.records import RawRecord
from relmerge.io.write import RESULT_FILE
from relmerge.progress import CountsBytes
from relmerge.stores.base import ObjectStore


class Fingerprint:
    """sha256 over every input record and the settings that determine the outputs.

    :meth:`records` passes the records through while hashing them, so a streamed input is
    read once; :meth:`hexdigest` is known once they have all gone by.
    """

    def __init__(self) -> None:
        self._digest = hashlib.sha256()

    def records(self, raws: Iterable[RawRecord]) -> HashedRecords:
        return HashedRecords(raws, self._digest)

    def hexdigest(self, *parts: Any) -> str:
        digest = self._digest.copy()
        for part in parts:
            digest.update(orjson.dumps(part, option=orjson.OPT_SORT_KEYS, default=str))
        return digest.hexdigest()


class HashedRecords:
    """Records passed through while hashed; says how much of the input is read, as the
    input does (``total_bytes`` / ``bytes_read`` of a local file, for progress)."""

    def __init__(self, raws: Iterable[RawRecord], digest: Any) -> None:
        self._raws = raws
        self._digest = digest
        if isinstance(raws, CountsBytes):
            self.total_bytes = raws.total_bytes
        if isinstance(raws, Sized):
            self.total_records = len(raws)

    @property
    def bytes_read(self) -> int:
        return self._raws.bytes_read if isinstance(self._raws, CountsBytes) else 0

    def __iter__(self) -> Iterator[RawRecord]:
        for raw in self._raws:
            self._digest.update(raw.origin.encode())
            self._digest.update(
                orjson.dumps(raw.data if raw.error is None else raw.text, default=str)
            )
            yield raw


RUN_MARKER = ".relmerge/run.json"


async def _recorded_fingerprint(store: ObjectStore, key: str) -> str | None:
    if not await store.exists(key):
        return None
    try:
        value = orjson.loads(await store.get(key)).get("fingerprint")
    except (orjson.JSONDecodeError, AttributeError, StoreError):
        return ""  # unreadable: a run was there, of unknown inputs
    return value if isinstance(value, str) else ""


async def claim_output(
    store: ObjectStore,
    run_fingerprint: str,
    overwrite: bool,
    command: Mapping[str, Any] | None = None,
) -> None:
    """Refuse to mix a different run into OUT; then mark OUT as this run's, in progress.

    The fingerprint is recorded in ``.relmerge/run.json`` before anything else is written,
    so a run killed before its result file exists is still recognised: the same run
    resumes into it, another one is refused unless told to overwrite. The old result file
    (the "complete" marker, written last) is removed, so a half-written run never looks
    complete. With the fingerprint go the time the run started (``started_at``: answers
    given later are not applied yet) and the ``command`` that started it, which
    ``relmerge review`` offers to run again (``relmerge.review.rerun``).
    """
    previous = await _recorded_fingerprint(store, RESULT_FILE)
    if previous is None:
        previous = await _recorded_fingerprint(store, RUN_MARKER)
    if previous is not None and previous != run_fingerprint and not overwrite:
        raise InputError(
            "the output directory holds a run with other inputs or configuration; "
            "choose another --output or pass --overwrite"
        )
    marker: dict[str, Any] = {"fingerprint": run_fingerprint, "started_at": time.time()}
    if command is not None:
        marker["command"] = dict(command)
    await store.put(RUN_MARKER, orjson.dumps(marker))
    if previous is not None:
        await store.delete(RESULT_FILE)


async def remove_stale_relations(store: ObjectStore, prefix: str, keys: Sequence[str]) -> int:
    """Delete relation files under ``prefix`` that this run did not write, and the temp
    files of interrupted writes."""
    current = set(keys)
    stale = [key for key in await store.list(prefix + "/") if key not in current]
    for key in stale:
        await store.delete(key)
    # A run killed mid-write leaves temp files (never listed as objects) behind.
    sweep = getattr(store, "remove_interrupted_writes", None)
    if sweep is not None:
        await sweep(prefix + "/")
    return len(stale)
