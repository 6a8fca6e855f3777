"""Writing a run's outputs as its chunks land: relation files, logs, the output order.

:class:`OutputWriter` writes each chunk's output relations while the next chunk is
worked, re-hashes a merged id an input already carries (:func:`free_merged_ids`), and
keeps what the run returns (the relations' JSON parked on disk, their keys, the id
mapping). :class:`RunLogs` gathers the decisions and clarifications chunk by chunk in
temporary files and stores them, with the rejected records, at the end.
"""

from __future__ import annotations

import asyncio
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import orjson

from relmerge.config import DeduplicateRelationsConfig
from relmerge.ids import merged_relation_id
from relmerge.io.records import Rejected
from relmerge.io.spool import JsonLines, ParkedBytes
from relmerge.io.write import jsonl, relation_key, write_files
from relmerge.model import ExtractedRelation
from relmerge.progress import Progress, working
from relmerge.stores.base import ObjectStore

# One output relation: the input indices it stands for, its id, its JSON.
Produced = tuple[tuple[int, ...], str, bytes]


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
            return [_parse(data) for data in self._encoded[index]]
        return _parse(self._encoded[index])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, OutputRelations):
            return list(self._encoded) == list(other._encoded)
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]


def _parse(data: bytes) -> ExtractedRelation:
    return ExtractedRelation.model_construct(**orjson.loads(data))


def free_merged_ids(
    outputs: Iterable[Produced], ids: Sequence[str], taken: set[str]
) -> Iterator[Produced]:
    """Give a merged relation another id when an input relation already has its id.

    Merged ids are predictable (a hash of member ids and name), so an input can carry one;
    the input relation keeps its id (it must, for idempotence) and the merged one is
    re-hashed with a salt until free. ``outputs`` are (members, id, JSON) per output
    relation; ``ids`` the input ids by input index; ``taken`` holds every valid input id.
    Without such an input nothing changes.
    """
    for members, relation_id, data in outputs:
        if len(members) > 1 and relation_id in taken:
            relation = _parse(data)
            member_ids = [ids[i] for i in members]
            salt = 1
            while (new_id := merged_relation_id(member_ids, relation.name, salt)) in taken:
                salt += 1
            relation = relation.model_copy(update={"relation_id": new_id})
            relation_id, data = new_id, relation.to_json()
        yield members, relation_id, data


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

    async def written(self) -> None:
        """Wait for the files handed to the store so far (a write error is raised here)."""
        if self._writing is not None:
            pending, self._writing = self._writing, None
            await pending

    async def write(self, produced: Iterable[Produced]) -> dict[str, str]:
        """Write relations (members, id, JSON); the final output id of each member's id.

        The files go to the store while the next chunk is worked (writing is mostly the
        disk's time, working a chunk the CPU's); one chunk's files at a time, in order."""
        files = []
        final_of: dict[str, str] = {}
        for members, relation_id, data in free_merged_ids(produced, self.ids, self._taken):
            files.append((relation_key(self.prefix, relation_id), data))
            self._firsts.append(members[0])
            self._keys.append(files[-1][0])
            self._encoded.append(data)
            for index in members:
                self._output_of[index] = relation_id
                final_of[self.ids[index]] = relation_id
        progress = self.progress
        progress.add_total("write", len(files))
        await self.written()
        working(progress, "write", True)
        self._writing = asyncio.ensure_future(
            write_files(self.store, files, lambda n: progress.advance("write", n))
        )
        self._writing.add_done_callback(lambda _: working(progress, "write", False))
        return final_of

    def abandon(self) -> None:
        """The run failed: nothing waits for the files in flight (their thread ends on
        its own), and the parked relations are dropped."""
        if self._writing is not None:
            self._writing.cancel()
        self._encoded.close()

    def finish(self) -> Written:
        """The relations in input order, their keys and the id mapping; checks that no two
        outputs share an id and that every input has an output (an internal bug else)."""
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


def final_decision_lines(
    lines: Iterable[dict[str, Any]], final_of: Mapping[str, str]
) -> Iterator[dict[str, Any]]:
    """Decision lines whose ``output_ids`` are the final outputs of their members: an id
    a stage gave an intermediate merge (merged again later) is never logged."""
    for line in lines:
        finals = (final_of.get(member) for member in line["member_ids"])
        yield {**line, "output_ids": list(dict.fromkeys(f for f in finals if f is not None))}


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
        """A chunk's decisions, once its relations are written (their final ids known)."""
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
