"""Intake: records stream in once, are checked and remapped, and wait for their chunk.

A run never needs the whole batch in memory at once: blocks (canonical endpoint pairs)
are independent, so the pipeline decides them a chunk of blocks at a time. Intake keeps
what every chunk shares — input ids, rejected records, issues — and parks the relations
in a :class:`RelationSpool`: in memory while the batch fits in one chunk, else in a
temporary file. :func:`plan_chunks` then cuts the batch into chunks of whole blocks.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO

import numpy as np
import numpy.typing as npt
import orjson

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.features import batch_shared_names
from relmerge.errors import InputError
from relmerge.io.records import RawRecord, RecordChecker, Rejected
from relmerge.model import EntityContext, ExtractedRelation, StepIssue
from relmerge.normalize import normalize_key_text
from relmerge.progress import CountsBytes, Progress, input_size
from relmerge.stages.remap import remap_relation, self_loop_issue

Indices = npt.NDArray[np.int64]


class RelationSpool:
    """Relations by input index: a dict until ``limit`` of them, then a temporary file.

    On disk each relation is one compact JSON object (already validated and remapped, so
    it is read back without validating again); only offsets stay in memory.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._memory: dict[int, ExtractedRelation] = {}
        self._file: IO[bytes] | None = None
        # Where each index's bytes start, and end, in the file (-1: no such index).
        self._starts: array[int] = array("q")
        self._ends: array[int] = array("q")
        self._size = 0

    @property
    def on_disk(self) -> bool:
        return self._file is not None

    def add(self, index: int, relation: ExtractedRelation) -> None:
        if self._file is None:
            self._memory[index] = relation
            if len(self._memory) > self.limit:
                self._spill()
            return
        self._append(index, relation)

    def _spill(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="relmerge-spool-")  # noqa: SIM115 (closed by close())
        for index, relation in self._memory.items():
            self._append(index, relation)
        self._memory = {}

    def _append(self, index: int, relation: ExtractedRelation) -> None:
        assert self._file is not None
        data = relation.to_json()
        self._file.write(data)
        missing = index + 1 - len(self._starts)
        if missing > 0:
            self._starts.extend([-1] * missing)
            self._ends.extend([-1] * missing)
        self._starts[index] = self._size
        self._size += len(data)
        self._ends[index] = self._size

    def load(self, indices: Iterable[int]) -> dict[int, ExtractedRelation]:
        """The relations of ``indices`` (a chunk), in the order given."""
        if self._file is None:
            return {index: self._memory[index] for index in indices}
        self._file.flush()
        descriptor = self._file.fileno()
        loaded = {}
        for index in indices:
            start = self._starts[index]
            fields = orjson.loads(os.pread(descriptor, self._ends[index] - start, start))
            loaded[index] = ExtractedRelation.model_construct(**fields)
        return loaded

    def load_raw(self, indices: Sequence[int]) -> list[ExtractedRelation] | list[bytes]:
        """The relations of ``indices`` as stored: objects while in memory, else their
        JSON bytes, unparsed (a chunk sent to a worker is parsed there)."""
        if self._file is None:
            return [self._memory[index] for index in indices]
        self._file.flush()
        descriptor = self._file.fileno()
        starts, ends = self._starts, self._ends
        return [os.pread(descriptor, ends[i] - starts[i], starts[i]) for i in indices]

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._memory = {}


def block_hash(relation: ExtractedRelation) -> int:
    """A stable 63-bit hash of the relation's unordered endpoint pair (its block):
    the same in every process and run, so chunks, and the order of the logs, are too."""
    ends = sorted((relation.source_entity_id, relation.target_entity_id))
    return _hash63(ends)


def _hash63(parts: Iterable[str]) -> int:
    digest = hashlib.blake2b("\x00".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


@dataclass
class Intake:
    """Everything about the batch that outlives a chunk."""

    spool: RelationSpool
    ids: list[str] = field(default_factory=list)  # valid relations' ids, input order
    rejected: list[Rejected] = field(default_factory=list)
    passthrough: list[tuple[int, ExtractedRelation]] = field(default_factory=list)
    issues: list[StepIssue] = field(default_factory=list)
    record_count: int = 0
    remapped_count: int = 0
    mapped: array[int] = field(default_factory=lambda: array("q"))  # indices in blocks
    hashes: array[int] = field(default_factory=lambda: array("q"))  # their block hashes
    key_hashes: array[int] = field(default_factory=lambda: array("q"))  # their exact keys'
    names: Counter[str] = field(default_factory=Counter)  # normalised relation names
    # Per relation in blocks: entity numbers and entity-name numbers, (source, target).
    ends: array[int] = field(default_factory=lambda: array("q"))
    end_names: array[int] = field(default_factory=lambda: array("q"))
    entity_numbers: dict[str, int] = field(default_factory=dict)
    name_numbers: dict[str, int] = field(default_factory=dict)

    def endpoints(self) -> tuple[Indices, Indices]:
        """Entity numbers and entity-name numbers, one (source, target) row per relation
        in blocks (the order of ``mapped``)."""
        ends = np.array(self.ends, dtype=np.int64).reshape(-1, 2)
        return ends, np.array(self.end_names, dtype=np.int64).reshape(-1, 2)

    def singletons(self) -> npt.NDArray[np.bool_]:
        """Per relation in blocks, whether it is alone in its block."""
        hashes = np.array(self.hashes, dtype=np.int64)
        _, inverse, counts = np.unique(hashes, return_inverse=True, return_counts=True)
        alone: npt.NDArray[np.bool_] = counts[inverse.ravel()] == 1
        return alone

    def shared_names(self, share: float) -> frozenset[str]:
        """The batch's names that tell no two facts apart (see ``batch_shared_names``)."""
        return batch_shared_names(self.names, len(self.mapped), share)

    def exact_group_count(self) -> int:
        """Exact-key groups the exact stage will settle (keys never span chunks)."""
        return int(np.unique(np.array(self.key_hashes, dtype=np.int64)).size)

    def multi_block_count(self) -> int:
        """Blocks of two or more records: the ones the semantic stage decides."""
        _, counts = np.unique(np.array(self.hashes, dtype=np.int64), return_counts=True)
        return int((counts > 1).sum())


_PROGRESS_EVERY = 1_000


class CountingSpool(RelationSpool):
    """A spool that keeps no relation: for a pass that only counts (``--dry-run``)."""

    def add(self, index: int, relation: ExtractedRelation) -> None:
        pass


def take_in(
    raws: Iterable[RawRecord],
    mapping: Mapping[str, str],
    records_per_chunk: int,
    on_read: Callable[[int], None] = lambda n: None,
    spool: RelationSpool | None = None,
) -> Intake:
    """Read ``raws`` once: check, remap and park each record (see the module docstring).
    ``on_read`` hears how many more records were read, every 1,000 and at the end;
    ``spool`` parks them (default: a :class:`RelationSpool` of ``records_per_chunk``)."""
    intake = Intake(spool if spool is not None else RelationSpool(records_per_chunk))
    try:
        _take_in(intake, raws, mapping, on_read)
    except BaseException:
        intake.spool.close()
        raise
    on_read(intake.record_count % _PROGRESS_EVERY)
    return intake


def _take_in(
    intake: Intake,
    raws: Iterable[RawRecord],
    mapping: Mapping[str, str],
    on_read: Callable[[int], None],
) -> None:
    checker = RecordChecker()
    for raw in raws:
        intake.record_count += 1
        if intake.record_count % _PROGRESS_EVERY == 0:
            on_read(_PROGRESS_EVERY)
        checked = checker.check(raw)
        if isinstance(checked, Rejected):
            intake.rejected.append(checked)
            continue
        index = len(intake.ids)
        intake.ids.append(checked.relation_id)
        relation, self_loop = remap_relation(checked, mapping)
        if self_loop is not None:
            intake.passthrough.append((index, checked))
            intake.issues.append(self_loop_issue(checked, self_loop))
            continue
        intake.remapped_count += relation is not checked
        intake.mapped.append(index)
        intake.hashes.append(block_hash(relation))
        name = normalize_key_text(relation.name)
        intake.names[name] += 1
        ends = (relation.source_entity_id, relation.target_entity_id)
        intake.key_hashes.append(_hash63((*ends, name, normalize_key_text(relation.type))))
        entities, names = intake.entity_numbers, intake.name_numbers
        intake.ends.append(entities.setdefault(relation.source_entity_id, len(entities)))
        intake.ends.append(entities.setdefault(relation.target_entity_id, len(entities)))
        intake.end_names.append(names.setdefault(relation.source_entity_name, len(names)))
        intake.end_names.append(names.setdefault(relation.target_entity_name, len(names)))
        intake.spool.add(index, relation)


def plan_chunks(intake: Intake, records_per_chunk: int) -> list[Indices]:
    """Input indices per chunk, each chunk whole blocks of about ``records_per_chunk``
    records (a larger block is a chunk of its own), in input order inside a chunk.

    A batch that fits is one chunk in input order: the run is then exactly the
    whole-batch run. Larger batches take blocks in hash order, so a chunk holds blocks
    from all over the input and chunks come out about the same size.
    """
    indices = np.array(intake.mapped, dtype=np.int64)
    if len(indices) <= records_per_chunk:
        return [indices] if len(indices) else []
    hashes = np.array(intake.hashes, dtype=np.int64)
    order = np.lexsort((indices, hashes))
    sorted_hashes = hashes[order]
    starts = np.flatnonzero(np.diff(sorted_hashes)) + 1  # where each later block starts
    chunks: list[Indices] = []
    begin = 0
    for start in starts.tolist():
        if start - begin >= records_per_chunk:
            chunks.append(np.sort(indices[order[begin:start]]))
            begin = start
    chunks.append(np.sort(indices[order[begin:]]))
    return chunks


def read_input(
    raws: Iterable[RawRecord],
    mapping: dict[str, str],
    config: DeduplicateRelationsConfig,
    progress: Progress,
) -> Intake:
    """Take the input in (:func:`take_in`), its reading shown as the phase ``read`` in
    bytes where the input says how much of it is read, else ``load`` in records."""
    phase, total = input_size(raws)
    progress.start(phase, total)
    if phase == "read":
        done = 0

        def on_read(records: int) -> None:
            nonlocal done
            now = raws.bytes_read if isinstance(raws, CountsBytes) else done
            progress.advance("read", now - done)
            done = now

    else:

        def on_read(records: int) -> None:
            progress.advance("load", records)

    intake = take_in(raws, mapping, config.records_per_chunk, on_read)
    progress.finish(phase)
    return intake


def check_intake(intake: Intake, config: DeduplicateRelationsConfig) -> None:
    """Refuse an input that holds nothing to work on (or, ``strict``, any bad record)."""
    if intake.record_count == 0:
        raise InputError("the input holds no relation records")
    if config.strict and intake.rejected:
        raise InputError(strict_failure(intake.rejected))
    if intake.rejected and not intake.ids:  # a wrong file, not a batch with a few bad records
        raise InputError(
            f"none of the {len(intake.rejected)} input records is a valid relation; "
            f"first: {intake.rejected[0].origin}: {intake.rejected[0].reason}"
        )


def strict_failure(rejected: Sequence[Rejected]) -> str:
    """The one-line error of ``strict=True``: how many records, and the first one's reason."""
    first = rejected[0]
    more = f" (and {len(rejected) - 1} more)" if len(rejected) > 1 else ""
    return (
        f"strict mode: {len(rejected)} input record(s) rejected; "
        f"first: {first.origin}: {first.reason}{more}"
    )


def canonical_entities(
    entities: Sequence[EntityContext], mapping: dict[str, str]
) -> dict[str, EntityContext]:
    """Entity contexts by canonical id (an entities file may still use alias ids)."""
    contexts: dict[str, EntityContext] = {}
    for entity in entities:
        canonical = mapping.get(entity.entity_id, entity.entity_id)
        if canonical not in contexts or entity.entity_id == canonical:
            contexts[canonical] = EntityContext(canonical, entity.name, entity.profile, entity.type)
    return contexts
