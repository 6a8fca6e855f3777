"""``SqlRelationStore``: the relation store over SQL, for every dialect.

The async methods run the synchronous SQL of :mod:`reads`, :mod:`writes` and :mod:`undo`
on one worker thread that owns the connection; an ``asyncio.Lock`` makes one operation
at a time run on it (a dump holds it until the dump ends). A batch's transaction spans
several calls (one per chunk of relations) so that progress is told as it goes and the
event loop never waits on a whole batch.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from types import TracebackType
from typing import Any, TypeVar

from relmerge.errors import InputError, RelmergeError, StoreError
from relmerge.graphstore import meta, reads, undo
from relmerge.graphstore.base import (
    RETRACTED,
    ApplyResult,
    Batch,
    BatchRecord,
    Changes,
    Member,
    Pair,
    PairState,
    Progress,
    StoreInfo,
    UndoResult,
    pair_of,
    relation_pair,
)
from relmerge.graphstore.db import Db, Dialect, Locks, chunks
from relmerge.graphstore.schema import SCHEMA_VERSION
from relmerge.graphstore.writes import BatchWrite, missing_targets
from relmerge.model import EntityContext, ExtractedRelation

T = TypeVar("T")
WRITE_CHUNK = 1000  # relations per call of a batch's transaction (and per progress tick)
DUMP_PAGE = 1000
# A load of this many relations or more refreshes the planner's statistics: after a bulk
# load of 1M rows PostgreSQL planned pair lookups from stale ones (a 10k merge: 6.0 s
# before ANALYZE, 2.9 s after).
STATISTICS_AFTER = 10_000


async def _chunked(
    items: AsyncIterable[ExtractedRelation] | Iterable[ExtractedRelation], size: int
) -> AsyncIterator[list[ExtractedRelation]]:
    chunk: list[ExtractedRelation] = []
    if isinstance(items, AsyncIterable):
        async for item in items:
            chunk.append(item)
            if len(chunk) >= size:
                yield chunk
                chunk = []
    else:
        for item in items:
            chunk.append(item)
            if len(chunk) >= size:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


class SqlRelationStore:
    """A :class:`~relmerge.graphstore.base.RelationStore` in a SQL database.

    >>> import asyncio, tempfile
    >>> from relmerge.graphstore import open_graph_store
    >>> async def main(url):
    ...     async with open_graph_store(url) as store:
    ...         await store.init()
    ...         return (await store.info()).relations
    >>> asyncio.run(main(f"sqlite:///{tempfile.mkdtemp()}/graph.db"))
    0
    """

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="relmerge-store")
        self._lock = asyncio.Lock()
        self._db: Db | None = None
        self._checked = False

    @property
    def url(self) -> str:
        return self._dialect.url

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    # -- the worker thread ------------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor, functools.partial(self._translated, fn, *args)
        )

    def _translated(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn`` on the worker thread, a driver's error raised as a one-line StoreError
        (and a connection that broke dropped, so the next call opens a new one)."""
        try:
            return fn(*args)
        except RelmergeError:
            raise
        except Exception as error:
            mapped = self._dialect.store_error(error)
            if mapped is None:
                raise
            if self._db is not None and self._dialect.is_broken(self._db.connection):
                self._close_connection()
            raise mapped from None

    def _connect(self, create: bool = False) -> Db:
        if self._db is None:
            self._db = Db(self._dialect, self._dialect.connect(create))
        if not self._checked and not create:
            self._check_schema(self._db)
        return self._db

    def _check_schema(self, db: Db) -> None:
        meta.check_schema(db, self.url)
        self._checked = True

    def _close_connection(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            self._checked = False
            with suppress(Exception):  # closing what broke may fail too
                db.connection.close()

    async def _open(self) -> Db:
        return await self._run(self._connect)

    async def _abort(self, db: Db) -> None:
        # Shielded: a cancelled batch still ends its transaction before the error goes on.
        await asyncio.shield(self._run(db.rollback))

    # -- schema -----------------------------------------------------------------------

    def _init(self) -> bool:
        created = meta.create_schema(self._connect(create=True), self.url)
        self._checked = True
        return created

    async def init(self) -> bool:
        async with self._lock:
            return await self._run(self._init)

    # -- reads ------------------------------------------------------------------------

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        async with self._lock:
            db = await self._open()

            def in_snapshot() -> T:
                with db.reading():
                    return fn(db, *args)

            return await self._run(in_snapshot)

    async def relations_for_pairs(self, pairs: Sequence[Pair]) -> dict[Pair, PairState]:
        return await self._read(reads.pair_states, list(pairs))

    async def relations_by_id(self, relation_ids: Sequence[str]) -> dict[str, ExtractedRelation]:
        return await self._read(reads.relations_by_id, list(relation_ids))

    async def entities(self, entity_ids: Sequence[str]) -> dict[str, EntityContext]:
        return await self._read(reads.entities, list(entity_ids))

    async def folded(self, input_ids: Sequence[str]) -> dict[str, str]:
        return await self._read(reads.folded, list(input_ids))

    async def members(
        self,
        *,
        documents: Sequence[str] = (),
        chunks: Sequence[str] = (),
        relation_ids: Sequence[str] = (),
    ) -> list[Member]:
        return await self._read(reads.members, list(documents), list(chunks), list(relation_ids))

    async def batch(self, batch_id: str) -> BatchRecord | None:
        return await self._read(reads.latest_batch, batch_id)

    async def batch_mapping(self, batch_id: str) -> dict[str, str]:
        def mapping(db: Db) -> dict[str, str]:
            record = reads.applied_batch(db, batch_id)
            return {} if record is None else reads.batch_mapping(db, record.seq)

        return await self._read(mapping)

    async def batch_decisions(self, batch_id: str) -> list[dict[str, Any]]:
        def decisions(db: Db) -> list[dict[str, Any]]:
            record = reads.applied_batch(db, batch_id)
            return [] if record is None else reads.batch_decisions(db, record.seq)

        return await self._read(decisions)

    async def changes_since_reconcile(self) -> Changes:
        def gather(db: Db) -> Changes:
            since, open_pairs = reads.reconciled(db)
            changed, through = reads.changes_since(db, since)
            return Changes(tuple(dict.fromkeys([*open_pairs, *changed])), since, through)

        return await self._read(gather)

    async def meta_value(self, key: str) -> str | None:
        return await self._read(meta.meta_value, key)

    async def update_meta(self, key: str, change: Callable[[str | None], str]) -> str:
        async with self._lock:
            db = await self._open()
            return await self._run(meta.update_meta, db, key, change)

    async def info(self, last: int = 5) -> StoreInfo:
        def gather(db: Db) -> StoreInfo:
            counts = reads.counts(db)
            return StoreInfo(
                schema_version=SCHEMA_VERSION,
                relations=counts["relations"],
                pairs=counts["pairs"],
                entities=counts["entities"],
                batches=counts["batches"],
                last_batches=tuple(reads.last_batches(db, last)),
            )

        return await self._read(gather)

    async def dump(
        self, progress: Progress | None = None
    ) -> AsyncGenerator[ExtractedRelation, None]:
        """Every stored relation in stored order, from one snapshot. It holds this store
        object until it ends: call nothing else on it meanwhile, and close the iterator
        (``contextlib.aclosing``) when stopping early."""
        async with self._lock:
            db = await self._open()
            await self._run(self._dialect.begin_read, db)
            try:
                after = 0
                while True:
                    page = await self._run(reads.dump_page, db, after, DUMP_PAGE)
                    if not page:
                        break
                    for _, relation in page:
                        yield relation
                    after = page[-1][0]
                    if progress is not None:
                        progress(len(page))
            finally:
                await self._abort(db)

    async def vectors(self, embedder: str, texts: Sequence[str]) -> dict[str, bytes]:
        digests = {text: reads.vector_digest(text) for text in texts}
        found = await self._read(reads.vectors, embedder, list(digests.values()))
        return {text: found[digest] for text, digest in digests.items() if digest in found}

    async def put_vectors(self, embedder: str, vectors: Mapping[str, bytes]) -> None:
        rows = [
            (embedder, reads.vector_digest(text), bytes(vector)) for text, vector in vectors.items()
        ]

        def put(db: Db) -> None:
            self._dialect.begin_write(db, Locks())
            try:
                for part in chunks(rows, WRITE_CHUNK):
                    db.executemany(
                        "INSERT INTO relmerge_vectors (embedder, digest, vector) "
                        "VALUES (?, ?, ?) ON CONFLICT (embedder, digest) DO NOTHING",
                        part,
                    )
                db.commit()
            except BaseException:
                db.rollback()
                raise

        async with self._lock:
            db = await self._open()
            await self._run(put, db)

    # -- writes -----------------------------------------------------------------------

    async def apply_batch(self, batch: Batch, progress: Progress | None = None) -> ApplyResult:
        _check_batch(batch)
        versions = {pair_of(*pair): int(version) for pair, version in batch.versions.items()}
        written = {r.relation_id for r in (*batch.inserts, *batch.updates)}
        others = sorted({t for t in batch.mapping.values() if t not in written and t != RETRACTED})
        async with self._lock:
            db = await self._open()
            # The pairs that mapped-to relations live in (a relation never changes pair,
            # so reading them before the locks is safe): they are locked with the rest.
            target_pairs = await self._run(
                reads.pairs_of_relations, db, sorted({*others, *batch.deletes})
            )
            locks = Locks.of(
                batch_id=batch.batch_id,
                pairs=[
                    *versions,
                    *(relation_pair(r) for r in (*batch.inserts, *batch.updates)),
                    *target_pairs.values(),
                ],
                entities=[entity.entity_id for entity in batch.entities],
                # Two batches inserting one id into different pairs: the second waits, then
                # finds it stored (unchanged, or refused), instead of failing on the index.
                relations=[relation.relation_id for relation in batch.inserts],
            )
            write = BatchWrite(db, batch.batch_id, batch.kind, versions)
            try:
                await self._run(write.begin, locks)
                earlier = await self._run(write.already)
                if earlier is not None:
                    await self._abort(db)
                    return ApplyResult("already_applied", batch.batch_id, earlier)
                conflicts = await self._run(write.conflicts)
                if conflicts:
                    await self._abort(db)
                    return ApplyResult("conflict", batch.batch_id, conflicts=tuple(conflicts))
                missing = await self._run(missing_targets, db, others)
                if missing:
                    raise StoreError(
                        f"batch {batch.batch_id!r} maps input ids to relations that are neither "
                        f"stored nor in the batch ({', '.join(repr(m) for m in missing[:3])})"
                    )
                await self._run(write.open, batch.fingerprint)
                for step, items in ((write.insert, batch.inserts), (write.update, batch.updates)):
                    for part in chunks(list(items), WRITE_CHUNK):
                        await self._run(step, part)
                        if progress is not None:
                            progress(len(part))
                if batch.deletes:
                    await self._run(write.delete, list(batch.deletes))
                if batch.absorbed:
                    await self._run(write.absorb, dict(batch.absorbed))
                    await self._run(write.absorbed_members, dict(batch.absorbed))
                members = list(batch.members) or _own_members(batch)
                for part in chunks(members, WRITE_CHUNK):
                    await self._run(write.members, part)
                await self._run(write.entities, list(batch.entities))
                write.mapped_pairs(target_pairs.values())
                for part in chunks(list(batch.mapping.items()), WRITE_CHUNK):
                    await self._run(write.map, part)
                for part in chunks(list(batch.decisions), WRITE_CHUNK):
                    await self._run(write.decisions, part)
                counts = await self._run(write.finish)
            except BaseException:
                await self._abort(db)
                raise
        return ApplyResult("applied", batch.batch_id, counts)

    async def load(
        self,
        relations: AsyncIterable[ExtractedRelation] | Iterable[ExtractedRelation],
        *,
        batch_id: str | None = None,
        entities: Sequence[EntityContext] = (),
        progress: Progress | None = None,
    ) -> ApplyResult:
        if batch_id is not None and (not isinstance(batch_id, str) or not batch_id.strip()):
            raise StoreError("a batch id must be a non-empty string")
        async with self._lock:
            db = await self._open()
            # A load holds the whole store: it checks no versions, and no merge may read
            # a pair half-loaded (it could not: the load commits once, at the end).
            write = BatchWrite(db, batch_id or "", "load", None)
            try:
                await self._run(write.begin, Locks(exclusive=True))
                if batch_id is not None:
                    earlier = await self._run(write.already)
                    if earlier is not None:
                        await self._abort(db)
                        return ApplyResult("already_applied", batch_id, earlier)
                await self._run(write.open, "", "loading")
                async for part in _chunked(relations, WRITE_CHUNK):
                    await self._run(write.insert, part)
                    # Each relation it inserts is its own member (one stored as it is
                    # already has its member row).
                    own = [Member(r, r.relation_id) for r in write.inserted]
                    await self._run(write.members, own)
                    await self._run(write.map, [(r.relation_id, r.relation_id) for r in part])
                    if progress is not None:
                        progress(len(part))
                await self._run(write.entities, list(entities))
                if not (write.counts["inserted"] or write.counts["unchanged"] or entities):
                    raise InputError("nothing to load: no relation and no entity was given")
                fingerprint = write.digest.hexdigest()
                final_id = batch_id or f"load-{fingerprint[:16]}"
                earlier = await self._run(write.already, final_id)
                if earlier is not None:
                    await self._abort(db)
                    return ApplyResult("already_applied", final_id, earlier)
                counts = await self._run(write.finish, final_id, fingerprint)
            except BaseException:
                await self._abort(db)
                raise
            if counts.inserted >= STATISTICS_AFTER:
                await self._run(db.execute, self._dialect.statistics_sql)
        return ApplyResult("applied", final_id, counts)

    async def undo(self, batch_id: str, *, check_only: bool = False) -> UndoResult:
        async with self._lock:
            db = await self._open()
            plan = await self._run(undo.plan, db, batch_id)
            if plan.record.status != "applied":
                return UndoResult("already_undone", batch_id)
            if check_only:
                await self._run(undo.check, db, plan)
                return UndoResult("undoable", batch_id)
            try:
                await self._run(self._dialect.begin_write, db, plan.locks())
                if not await self._run(undo.still_applied, db, plan):
                    await self._abort(db)
                    return UndoResult("already_undone", batch_id)
                await self._run(undo.refuse_if_later, db, plan)
                removed, restored = await self._run(undo.restore, db, plan)
            except BaseException:
                await self._abort(db)
                raise
        return UndoResult("undone", batch_id, removed, restored)

    # -- lifetime ---------------------------------------------------------------------

    async def close(self) -> None:
        async with self._lock:
            await self._run(self._close_connection)
        self._executor.shutdown(wait=True)

    async def __aenter__(self) -> SqlRelationStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


def _own_members(batch: Batch) -> list[Member]:
    """The member rows of a merge that gave none: a relation it inserted for itself alone
    is its own member, as it came; any other relation it wrote stands for members not
    known one by one (opaque: a retract then keeps its wording)."""
    if batch.kind != "merge":
        return []
    into: dict[str, set[str]] = {}
    for input_id, relation_id in batch.mapping.items():
        into.setdefault(relation_id, set()).add(input_id)
    members = []
    for relation in batch.inserts:
        alone = into.get(relation.relation_id, {relation.relation_id}) == {relation.relation_id}
        members.append(Member(relation, relation.relation_id, "input" if alone else "opaque"))
    members += [Member(r, r.relation_id, "opaque") for r in batch.updates]
    return members


def _check_batch(batch: Batch) -> None:
    if not isinstance(batch.batch_id, str) or not batch.batch_id.strip():
        raise StoreError("a batch id must be a non-empty string")
    if batch.absorbed:
        survivors = {relation.relation_id for relation in batch.updates}
        written = survivors | {relation.relation_id for relation in batch.inserts}
        if not set(batch.absorbed.values()) <= survivors or set(batch.absorbed) & written:
            raise StoreError(
                f"batch {batch.batch_id!r}: each absorbed relation joins a survivor the "
                "batch updates, and no survivor is absorbed"
            )
    if batch.deletes and not batch.retract:
        raise StoreError(f"batch {batch.batch_id!r}: only a retract removes relations")
    written = {relation.relation_id for relation in (*batch.inserts, *batch.updates)}
    if written & set(batch.deletes):
        raise StoreError(f"batch {batch.batch_id!r} both writes and removes a relation")
