"""Writing a run's outputs as its chunks land: relation files, logs, the output order.

:class:`OutputWriter` writes each chunk's output relations while the next chunk is
worked, re-hashes a merged id an input already carries (:func:`free_merged_ids`), and
keeps what the run returns (the relations' JSON parked on disk, their keys, the id
mapping). :class:`RunLogs` gathers the decisions and clarifications chunk by chunk in
temporary files and stores them, with the rejected records, at the end.

An engine whose workers can reach the run's output directory (a :class:`LocalStore`
they see as the driver does) has them write their chunks' relation files themselves
(:meth:`OutputWriter.share`, :class:`SharedOutputs`): the same bytes under the same keys
and final ids, the driver keeping only the bookkeeping (:class:`WrittenOutputs`).
"""

from __future__ import annotations

import asyncio
import uuid
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

from relmerge.config import DeduplicateRelationsConfig
from relmerge.engines.outputs import (
    EncodedLines,
    Produced,
    SharedOutputs,
    WrittenOutputs,
    final_decision_lines,
    free_merged_ids,
    parse_relation,
)
from relmerge.ids import has_merged_id_shape
from relmerge.io.records import Rejected
from relmerge.io.spool import JsonLines, ParkedBytes
from relmerge.io.write import jsonl, relation_key, write_files
from relmerge.model import ExtractedRelation
from relmerge.progress import Progress, working
from relmerge.stores.base import ObjectStore
from relmerge.stores.local import LocalStore

__all__ = [
    "OutputRelations",
    "OutputWriter",
    "RunLogs",
    "Written",
    "final_decision_lines",
    "free_merged_ids",
]


class OutputRelations(Sequence[ExtractedRelation]):
    """The output relations, in order, kept as their JSON bytes (as written to the store,
    parked in a temporary file: see ``io.spool.ParkedBytes``). Items are parsed when read."""

    def __init__(self, encoded: Sequence[bytes]) -> None:
        self._encoded = encoded

    def __len__(self) -> int:
        return len(self._encoded)

    @overload
    def __getitem__(self, index: int) -> ExtractedRelation: ...

    @overload
    def __getitem__(self, index: slice) -> list[ExtractedRelation]: ...

    def __getitem__(self, index: int | slice) -> ExtractedRelation | list[ExtractedRelation]:
        if isinstance(index, slice):
            return [parse_relation(data) for data in self._encoded[index]]
        return parse_relation(self._encoded[index])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, OutputRelations):
            return list(self._encoded) == list(other._encoded)
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class Written:
    """What the run returns of its relations: in input order (of their first member),
    their store keys in the same order, and every input id's output id."""

    relations: OutputRelations
    keys: list[str]
    mapping: dict[str, str]


class OutputWriter:
    """Writes a run's output relations into ``store`` under ``prefix``, one chunk's files
    at a time, in the order the chunks come (``progress`` phase ``write``)."""

    def __init__(
        self, store: ObjectStore, prefix: str, ids: Sequence[str], progress: Progress
    ) -> None:
        self.store = store
        self.prefix = prefix
        self.ids = ids  # input ids by input index
        self.progress = progress
        self._taken = set(ids)
        self._firsts: array[int] = array("q")  # first member per output relation, as written
        self._keys: list[str] = []
        self._encoded = ParkedBytes()  # the output relations' JSON, parked on disk
        self._output_of: list[str] = [""] * len(ids)  # input index -> output relation id
        self._writing: asyncio.Future[None] | None = None  # the files of the chunk before
        self._marker: Path | None = None  # see ``share``

    def share(self) -> SharedOutputs | None:
        """Where workers may write their chunks' relation files themselves: a local
        directory (a :class:`LocalStore`), marked for them to recognise it; None for any
        other store (the driver writes)."""
        if not isinstance(self.store, LocalStore):
            return None
        root = self.store.root.resolve()
        marker = root / f".relmerge-shared-{uuid.uuid4().hex}.tmp"  # never listed as a key
        try:
            root.mkdir(parents=True, exist_ok=True)
            marker.touch(exist_ok=False)
        except OSError:
            return None
        self._unmark()
        self._marker = marker
        taken = frozenset(filter(has_merged_id_shape, self._taken))
        return SharedOutputs(str(root), self.prefix, marker.name, taken)

    def _unmark(self) -> None:
        if self._marker is not None:
            self._marker.unlink(missing_ok=True)
            self._marker = None

    async def written(self) -> None:
        """Wait for the files handed to the store so far (a write error is raised here)."""
        if self._writing is not None:
            pending, self._writing = self._writing, None
            await pending

    async def write(self, produced: Iterable[Produced]) -> dict[str, str]:
        """Write relations (members, id, JSON); the final output id of each member's id.

        The files go to the store while the next chunk is worked (writing is mostly the
        disk's time, working a chunk the CPU's); one chunk's files at a time, in order.
        :class:`WrittenOutputs` a worker has written already: only their bookkeeping."""
        if isinstance(produced, WrittenOutputs):
            return self._written_by_worker(produced)
        files = []
        final_of: dict[str, str] = {}
        for members, relation_id, data in free_merged_ids(produced, self.ids, self._taken):
            files.append((relation_key(self.prefix, relation_id), data))
            self._keep(members, relation_id, files[-1][0], data, final_of)
        progress = self.progress
        progress.add_total("write", len(files))
        await self.written()
        working(progress, "write", True)
        self._writing = asyncio.ensure_future(
            write_files(self.store, files, lambda n: progress.advance("write", n))
        )
        self._writing.add_done_callback(lambda _: working(progress, "write", False))
        return final_of

    def _written_by_worker(self, produced: WrittenOutputs) -> dict[str, str]:
        final_of: dict[str, str] = {}
        for members, relation_id, data in produced:
            if len(members) > 1 and relation_id in self._taken:  # its ids were freed there
                raise AssertionError("a worker wrote a merged relation under an input's id")
            self._keep(members, relation_id, relation_key(self.prefix, relation_id), data, final_of)
        self.progress.add_total("write", len(produced))
        self.progress.advance("write", len(produced))
        return final_of

    def _keep(
        self,
        members: tuple[int, ...],
        relation_id: str,
        key: str,
        data: bytes,
        final_of: dict[str, str],
    ) -> None:
        """One output relation's bookkeeping: its order, key, JSON and members' output."""
        self._firsts.append(members[0])
        self._keys.append(key)
        self._encoded.append(data)
        for index in members:
            self._output_of[index] = relation_id
            final_of[self.ids[index]] = relation_id

    def abandon(self) -> None:
        """The run failed: nothing waits for the files in flight (their thread ends on
        its own), and the parked relations are dropped."""
        if self._writing is not None:
            self._writing.cancel()
        self._unmark()
        self._encoded.close()

    def finish(self) -> Written:
        """The relations in input order, their keys and the id mapping; checks that no two
        outputs share an id and that every input has an output (an internal bug else)."""
        self._unmark()
        order = sorted(range(len(self._firsts)), key=self._firsts.__getitem__)  # input order
        keys = [self._keys[i] for i in order]
        relations = OutputRelations(self._encoded.ordered(array("q", order)))
        self._keys.clear()
        del self._firsts[:]
        if len(set(keys)) != len(keys):
            raise AssertionError("two output relations share an id")  # a bug, never input
        if not all(self._output_of):
            raise AssertionError("an input relation has no output")  # a bug, never input
        return Written(relations, keys, dict(zip(self.ids, self._output_of, strict=True)))


@dataclass
class RunLogs:
    """The run's logs, written chunk by chunk to temporary files (see ``io.spool``) and
    stored at the end (:meth:`store`)."""

    exact: JsonLines = field(default_factory=JsonLines)
    semantic: JsonLines = field(default_factory=JsonLines)
    clarifications: JsonLines = field(default_factory=JsonLines)

    def add_decisions(
        self,
        exact: Iterable[dict[str, Any]],
        semantic: Iterable[dict[str, Any]],
        final_of: Mapping[str, str],
    ) -> None:
        """A chunk's decisions, once its relations are written (their final ids known);
        lines a worker encoded (:class:`EncodedLines`) already name the final ids."""
        if isinstance(exact, EncodedLines) and isinstance(semantic, EncodedLines):
            self.exact.extend(exact)
            self.semantic.extend(semantic)
            return
        self.exact.extend(final_decision_lines(exact, final_of))
        self.semantic.extend(final_decision_lines(semantic, final_of))

    async def store(
        self,
        store: ObjectStore,
        config: DeduplicateRelationsConfig,
        prefix: str,
        rejected: Sequence[Rejected],
    ) -> list[str]:
        """Decisions, clarifications and rejected records (those not turned off) under
        ``prefix`` (the store's root without one); their keys, as written."""
        keys: list[str] = []

        def key(name: str) -> str:
            keys.append(f"{prefix}/{name}" if prefix else name)
            return keys[-1]

        if config.decisions_key:
            await self.exact.put(store, key(config.decisions_key), self.semantic)
        if config.clarifications_key:
            await self.clarifications.put(store, key(config.clarifications_key))
        if config.rejected_key:
            await store.put(key(config.rejected_key), jsonl(r.to_dict() for r in rejected))
        return keys

    def close(self) -> None:
        for log in (self.exact, self.semantic, self.clarifications):
            log.close()
