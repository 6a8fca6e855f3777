"""Relation files written where a chunk was worked: a worker that sees the run's output
directory writes its chunk's files itself, and the driver only keeps the bookkeeping.

The driver's writer (``relmerge.run.writer.OutputWriter.share``) is handed to the engine
in ``ChunkRun.share``; an engine whose workers may write asks it for
:class:`SharedOutputs`: a local directory (the run's
:class:`~relmerge.stores.local.LocalStore`), a marker file the driver created in it, and
the input ids a merged id could collide with. A worker that sees the marker (the same
directory, on this machine or a shared file system) writes its chunk's relations under
their final ids (:func:`free_merged_ids`, as the driver would) and says so
(:class:`WrittenOutputs`); one that does not hands its outputs back for the driver to
write, as does every worker of a run into any other store (memory, object-store URL).
The bytes, keys and ids are those the driver would have written. Such a worker also
sends its chunk's decision and clarification lines encoded (:func:`encode_logs`), their
``output_ids`` final: bytes cost the driver far less to take in than the objects.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any, cast

import orjson

from relmerge.ids import merged_relation_id
from relmerge.io.write import relation_key
from relmerge.model import ExtractedRelation
from relmerge.stages.chunk import ChunkResult
from relmerge.stores.local import LocalStore

# One output relation: the input indices it stands for, its id, its JSON.
Produced = tuple[tuple[int, ...], str, bytes]


def parse_relation(data: bytes) -> ExtractedRelation:
    return ExtractedRelation.model_construct(**orjson.loads(data))


def free_merged_ids(
    outputs: Iterable[Produced], ids: Sequence[str] | Mapping[int, str], taken: Set[str]
) -> Iterator[Produced]:
    """Give a merged relation another id when an input relation already has its id.

    Merged ids are predictable (a hash of member ids and name), so an input can carry one;
    the input relation keeps its id (it must, for idempotence) and the merged one is
    re-hashed with a salt until free. ``outputs`` are (members, id, JSON) per output
    relation; ``ids`` the input ids by input index; ``taken`` holds every valid input id
    (or at least every one of a merged id's shape: only those can collide).
    Without such an input nothing changes.
    """
    for members, relation_id, data in outputs:
        if len(members) > 1 and relation_id in taken:
            relation = parse_relation(data)
            member_ids = [ids[i] for i in members]
            salt = 1
            while (new_id := merged_relation_id(member_ids, relation.name, salt)) in taken:
                salt += 1
            relation = relation.model_copy(update={"relation_id": new_id})
            relation_id, data = new_id, relation.to_json()
        yield members, relation_id, data


def final_decision_lines(
    lines: Iterable[dict[str, Any]], final_of: Mapping[str, str]
) -> Iterator[dict[str, Any]]:
    """Decision lines whose ``output_ids`` are the final outputs of their members: an id
    a stage gave an intermediate merge (merged again later) is never logged."""
    for line in lines:
        finals = (final_of.get(member) for member in line["member_ids"])
        yield {**line, "output_ids": list(dict.fromkeys(f for f in finals if f is not None))}


class EncodedLines:
    """Log lines (JSON objects) encoded where the chunk was worked: they cross to the
    driver as bytes, a fraction of the cost of the objects, and a log appends them as
    they are (``io.spool.JsonLines`` writes an ``orjson.Fragment`` verbatim)."""

    def __init__(self, items: Iterable[Any]) -> None:
        self.lines = [orjson.dumps(item) for item in items]

    def __iter__(self) -> Iterator[Any]:
        return (orjson.Fragment(line) for line in self.lines)

    def __len__(self) -> int:
        return len(self.lines)


def encode_logs(result: ChunkResult, ids: Mapping[int, str]) -> None:
    """A chunk's decisions (their final ``output_ids``, as the driver would log them once
    its relations are written: ``result.outputs`` are) and clarifications, encoded."""
    final_of = {ids[index]: rid for members, rid, _ in result.outputs for index in members}
    exact = EncodedLines(final_decision_lines(result.exact_decisions, final_of))
    semantic = EncodedLines(final_decision_lines(result.semantic_decisions, final_of))
    result.exact_decisions = cast("list[dict[str, Any]]", exact)
    result.semantic_decisions = cast("list[dict[str, Any]]", semantic)
    result.clarifications = cast("list[dict[str, Any]]", EncodedLines(result.clarifications))


class WrittenOutputs(list[Produced]):
    """A chunk's output relations whose files a worker has written, under their final
    ids: the driver's writer keeps their bookkeeping and writes nothing."""


@dataclass(frozen=True)
class SharedOutputs:
    """Where a worker writes its chunk's relation files itself: the run's output directory
    (``root``, absolute), the relations' ``prefix``, the name of a ``marker`` file the
    driver created there (a worker that does not see it writes nothing), and ``taken``:
    the input ids of a merged id's shape (``free_merged_ids``)."""

    root: str
    prefix: str
    marker: str
    taken: frozenset[str]

    def reachable(self) -> bool:
        """Whether this process sees the driver's output directory."""
        return os.path.isfile(os.path.join(self.root, self.marker))

    async def write(self, outputs: Sequence[Produced], ids: Mapping[int, str]) -> WrittenOutputs:
        """Write a chunk's relations under their final ids (``ids``: the chunk's input
        ids by input index); what was written."""
        if any(len(members) > 1 and rid in self.taken for members, rid, _ in outputs):
            outputs = list(free_merged_ids(outputs, ids, self.taken))
        files = [(relation_key(self.prefix, rid), data) for _, rid, data in outputs]
        # A store per chunk: a worker outlives a run, and the next one into the same
        # directory may have removed the folders the store remembers making.
        await LocalStore(self.root).put_many(files)
        return WrittenOutputs(outputs)
