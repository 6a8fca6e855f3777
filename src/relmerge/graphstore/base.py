"""The relation store protocol and the values it takes and returns.

A relation store keeps a growing graph between runs (DESIGN §8): relations by id, looked
up by their unordered endpoint pair; entity profiles; and every batch that changed it,
with the batch's id mapping, decisions and a change log from which it can be undone.

Why async: the merge that calls it is asyncio (the LLM, the embedder), and a lookup or a
batch must not stall the event loop. The backends run their database work on one worker
thread each (:mod:`relmerge.graphstore.engine`): sqlite3 is synchronous, and one
synchronous implementation for both dialects keeps the transaction logic in one place.
"""

from __future__ import annotations

import hashlib
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Protocol, runtime_checkable

from relmerge.model import EntityContext, ExtractedRelation

Pair = tuple[str, str]
"""A canonical endpoint pair: ``(min, max)`` of the two entity ids (see :func:`pair_of`)."""

BatchKind = Literal["load", "merge", "reconcile", "retract"]
Progress = Callable[[int], None]
"""Told how many more relations a long write or read has done."""


def pair_of(source_entity_id: str, target_entity_id: str) -> Pair:
    """The unordered pair as stored: ``pair_of("b", "a") == pair_of("a", "b") == ("a", "b")``.

    Ordered in Python, never by the database: a server's collation must not decide it.
    """
    if source_entity_id <= target_entity_id:
        return (source_entity_id, target_entity_id)
    return (target_entity_id, source_entity_id)


def relation_pair(relation: ExtractedRelation) -> Pair:
    return pair_of(relation.source_entity_id, relation.target_entity_id)


def lock_key(kind: str, *parts: str) -> int:
    """A signed 64-bit key for what a transaction locks (PostgreSQL advisory locks)."""
    digest = hashlib.blake2b("\x00".join((kind, *parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def stripe_key(kind: str, item: str, stripes: int = 64) -> int:
    """The key of one of ``stripes`` locks that share the items of a kind: a batch holds
    at most that many, however many items it has (PostgreSQL keeps advisory locks in a
    table of fixed size), at the price of waiting, now and then, for an unrelated item."""
    return lock_key(f"{kind}-stripe", str(lock_key(kind, item) % stripes))


@dataclass(frozen=True)
class PairState:
    """A pair's stored relations (in the order they were stored) and its version.

    The version grows with every batch or undo that changes the pair (0: never touched);
    a batch gives back the versions it read, and is refused if one has moved since.
    """

    pair: Pair
    version: int
    relations: tuple[ExtractedRelation, ...] = ()


RETRACTED = ""
"""The stored id a retracted input id maps to: nothing (``relmerge store retract``)."""

MemberOrigin = Literal["input", "opaque"]


@dataclass(frozen=True)
class Member:
    """One input record a stored relation stands for, as it came (id, wording, chunk ids,
    document), kept so that a document can be taken back and the relation rebuilt from
    the members that remain.

    ``relation_id``: the stored relation it is folded into (:data:`RETRACTED`: taken back).
    ``origin``: ``input`` (the record as the batch gave it) or ``opaque`` (a stored
    relation standing for members not known one by one: a store made before members were
    kept, or a batch that gave no member records). ``batch_seq``/``position``: where the
    store keeps it (0 before it is written); the latest applied row of a member id is its
    current state. ``joined``: the batch that first folded it in (0: the batch writing it),
    kept when a reconcile or a retract moves it, for the id a rebuilt relation gets.
    """

    record: ExtractedRelation
    relation_id: str
    origin: MemberOrigin = "input"
    batch_seq: int = 0
    position: int = 0
    joined: int = 0

    @property
    def member_id(self) -> str:
        return self.record.relation_id


@dataclass(frozen=True)
class Batch:
    """What one merge decided, applied by :meth:`RelationStore.apply_batch` in one
    transaction.

    ``versions``: every pair the decisions depend on, at the version read (from
    :meth:`RelationStore.relations_for_pairs`); each pair the batch writes must be in it.
    ``inserts``: new relations (they keep their ids). ``updates``: the new full record of
    stored relations (same id, same pair). ``mapping``: each input id of the batch to the
    stored id it became or joined. ``decisions``: opaque JSON objects, kept with the batch.
    ``entities``: entity profiles to add or replace. ``absorbed`` (a batch of kind
    ``reconcile``): stored relations folded into another stored one (absorbed id ->
    survivor id, the survivor among ``updates``): kept, and logged, but every read skips
    them, and an id of one resolves to its survivor, until the batch is undone.
    ``reconcile``: of that kind even when it absorbs nothing (it records what it covered).
    ``members``: the input records behind ``mapping`` (:class:`Member`); a merge that
    gives none has each written relation kept as its own (opaque) member; a reconcile's
    absorbed members move to their survivor by themselves. ``deletes`` and ``retract``:
    a batch of kind ``retract`` removes stored relations left with no member.
    """

    batch_id: str
    versions: Mapping[Pair, int]
    inserts: Sequence[ExtractedRelation] = ()
    updates: Sequence[ExtractedRelation] = ()
    mapping: Mapping[str, str] = field(default_factory=dict)
    decisions: Sequence[Mapping[str, Any]] = ()
    entities: Sequence[EntityContext] = ()
    fingerprint: str = ""
    absorbed: Mapping[str, str] = field(default_factory=dict)
    reconcile: bool = False
    members: Sequence[Member] = ()
    deletes: Sequence[str] = ()
    retract: bool = False

    @property
    def kind(self) -> BatchKind:
        if self.retract:
            return "retract"
        return "reconcile" if self.absorbed or self.reconcile else "merge"


@dataclass(frozen=True)
class BatchCounts:
    """What a batch did: relations inserted and updated, records already stored as they
    are (``unchanged``), input ids mapped, decisions kept, entities written, stored
    relations absorbed (a reconcile)."""

    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    mapped: int = 0
    decisions: int = 0
    entities: int = 0
    absorbed: int = 0
    removed: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "inserted": self.inserted,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "mapped": self.mapped,
            "decisions": self.decisions,
            "entities": self.entities,
            "absorbed": self.absorbed,
            "removed": self.removed,
        }


@dataclass(frozen=True)
class BatchRecord:
    """A batch as the store keeps it. ``seq`` orders batches as they were applied."""

    batch_id: str
    seq: int
    kind: str
    fingerprint: str
    status: Literal["applied", "undone"]
    applied_at: str
    undone_at: str | None
    counts: BatchCounts


@dataclass(frozen=True)
class ApplyResult:
    """``applied``; ``already_applied`` (nothing changed: ``counts`` are the earlier
    application's); or ``conflict``: nothing written, and ``conflicts`` lists the pairs
    whose version moved since it was read (re-read and re-decide just those)."""

    status: Literal["applied", "already_applied", "conflict"]
    batch_id: str
    counts: BatchCounts = BatchCounts()
    conflicts: tuple[Pair, ...] = ()


@dataclass(frozen=True)
class UndoResult:
    """``undone`` (``removed`` relations it had inserted, ``restored`` the ones it had
    updated), ``already_undone`` (nothing changed), or ``undoable`` (a check that changed
    nothing)."""

    status: Literal["undone", "already_undone", "undoable"]
    batch_id: str
    removed: int = 0
    restored: int = 0


@dataclass(frozen=True)
class Changes:
    """What changed since the last applied reconcile (``reconcile --pending``'s scope).

    ``pairs``: those whose relations an applied batch inserted or changed after it, with
    the pairs it left open (clarifications); ``since``: the newest batch that reconcile
    covered (0: none yet); ``through``: the newest applied batch (reconciles aside) when
    read, which the next reconcile covers.
    """

    pairs: tuple[Pair, ...]
    since: int
    through: int


@dataclass(frozen=True)
class StoreInfo:
    schema_version: int
    relations: int
    pairs: int
    entities: int
    batches: int
    last_batches: tuple[BatchRecord, ...]


@runtime_checkable
class RelationStore(Protocol):
    """A relation store (:func:`relmerge.graphstore.open_graph_store` opens one by URL).

    Every method but :meth:`init` checks the schema version first. One store object runs
    one operation at a time; open one per task for parallel work (processes and other
    store objects are fine: that is what the pair versions are for).
    """

    @property
    def url(self) -> str:
        """The store's URL with its password hidden: what messages may show."""
        ...

    async def init(self) -> bool:
        """Create the schema; False when it was there already (idempotent)."""
        ...

    async def relations_for_pairs(self, pairs: Sequence[Pair]) -> dict[Pair, PairState]:
        """The stored relations and version of each pair (either order), keyed by the
        canonical pair; one query per few hundred pairs, read in one snapshot."""
        ...

    async def relations_by_id(self, relation_ids: Sequence[str]) -> dict[str, ExtractedRelation]:
        """The stored relations among ``relation_ids`` (ids not stored are left out); an
        id a reconcile absorbed gives its survivor (a stored id resolves forever)."""
        ...

    async def entities(self, entity_ids: Sequence[str]) -> dict[str, EntityContext]:
        """The entity profiles the store has among ``entity_ids``."""
        ...

    async def folded(self, input_ids: Sequence[str]) -> dict[str, str]:
        """Input id -> stored id, for the ids an applied batch already folded in (a stored
        id a reconcile absorbed since: its survivor)."""
        ...

    async def members(
        self,
        *,
        documents: Sequence[str] = (),
        chunks: Sequence[str] = (),
        relation_ids: Sequence[str] = (),
    ) -> list[Member]:
        """The current members (not taken back) whose record has one of ``documents``
        or ``chunks``, or that are folded into one of ``relation_ids``; read by index,
        in one snapshot, ordered as stored."""
        ...

    async def apply_batch(self, batch: Batch, progress: Progress | None = None) -> ApplyResult:
        """Apply a merge's batch atomically and at most once (see :class:`ApplyResult`)."""
        ...

    async def load(
        self,
        relations: AsyncIterable[ExtractedRelation] | Iterable[ExtractedRelation],
        *,
        batch_id: str | None = None,
        entities: Sequence[EntityContext] = (),
        progress: Progress | None = None,
    ) -> ApplyResult:
        """Insert relations as they are, as one logged batch of kind ``load``.

        A relation already stored with the same content is ``unchanged``; with other
        content the load is refused (:class:`~relmerge.errors.RelationIdTakenError`).
        Without ``batch_id`` the batch is named ``load-`` + a digest of what it holds, so
        loading the same graph again changes nothing.
        """
        ...

    async def undo(self, batch_id: str, *, check_only: bool = False) -> UndoResult:
        """Restore what the batch changed and remove what it inserted, in one transaction;
        refused (:class:`~relmerge.errors.UndoRefusedError`) when a later applied batch
        changed the same relations or maps input ids to relations it inserted.
        ``check_only``: change nothing, only refuse as the undo would (``undoable``)."""
        ...

    def dump(self, progress: Progress | None = None) -> AsyncGenerator[ExtractedRelation, None]:
        """Every stored relation, in the order stored, from one snapshot (those an applied
        reconcile absorbed are left out)."""
        ...

    async def batch(self, batch_id: str) -> BatchRecord | None:
        """The latest batch of that id, applied or undone."""
        ...

    async def batch_mapping(self, batch_id: str) -> dict[str, str]:
        """The id mapping of the applied batch ``batch_id``."""
        ...

    async def batch_decisions(self, batch_id: str) -> list[dict[str, Any]]:
        """The decisions of the applied batch ``batch_id``, in the order given."""
        ...

    async def changes_since_reconcile(self) -> Changes:
        """The pairs changed since the last applied reconcile, read in one snapshot (a
        reconcile records the newest batch it covered and the pairs it left open)."""
        ...

    async def info(self, last: int = 5) -> StoreInfo:
        """Schema version, counts, and the ``last`` batches (newest first)."""
        ...

    async def meta_value(self, key: str) -> str | None:
        """The text the store keeps under ``key`` besides its schema version (None:
        nothing yet)."""
        ...

    async def update_meta(self, key: str, change: Callable[[str | None], str]) -> str:
        """Replace ``key``'s text by ``change`` of it, atomically against other writers;
        the new text."""
        ...

    async def vectors(self, embedder: str, texts: Sequence[str]) -> dict[str, bytes]:
        """Cached float32 vectors (raw bytes) of those ``texts`` that have one."""
        ...

    async def put_vectors(self, embedder: str, vectors: Mapping[str, bytes]) -> None:
        """Cache vectors by text (a cache, outside batches: never logged nor undone)."""
        ...

    async def close(self) -> None: ...

    async def __aenter__(self) -> RelationStore: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...
