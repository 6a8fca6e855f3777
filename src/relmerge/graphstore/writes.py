"""One batch's write transaction, step by step: what ``apply_batch`` and ``load`` share.

The steps run on the store's worker thread, one call each, inside one transaction that
:meth:`BatchWrite.finish` commits (nothing of the batch is visible before) and
:meth:`BatchWrite.abort` rolls back. A process killed anywhere in between leaves nothing:
SQLite rolls back the uncommitted journal on the next open, PostgreSQL when the
connection drops.

Every change is written to ``relmerge_changes`` with its before and after image, the
only thing :mod:`relmerge.graphstore.undo` needs. A record equal to what is stored is
``unchanged``: neither written nor logged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from relmerge.errors import RelationIdTakenError, StoreError
from relmerge.graphstore.base import RETRACTED, BatchCounts, Member, Pair, relation_pair
from relmerge.graphstore.db import Db, Locks, chunks, marks
from relmerge.graphstore.reads import (
    applied_batch,
    current_members,
    entities,
    pair_versions,
    stored_rows,
)
from relmerge.graphstore.schema import (
    RELATION_COLUMNS,
    entity_json,
    entity_row,
    relation_json,
    relation_row,
    row_relation,
)
from relmerge.model import EntityContext, ExtractedRelation

_INSERT_RELATION = (
    f"INSERT INTO relmerge_relations ({RELATION_COLUMNS}, inserted_by) VALUES ({marks(15)})"
)
_UPDATE_RELATION = (
    "UPDATE relmerge_relations SET chunk_id = ?, document_id = ?, source_entity_id = ?, "
    "target_entity_id = ?, source_entity_name = ?, target_entity_name = ?, type = ?, "
    "name = ?, description = ?, attributes = ?, source_chunk_ids = ? WHERE relation_id = ?"
)
_LOG = (
    "INSERT INTO relmerge_changes (batch_seq, position, kind, item_id, op, before, after) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_BUMP = (
    "INSERT INTO relmerge_pairs (pair_lo, pair_hi, version, relation_count) "
    "VALUES (?, ?, 1, ?) ON CONFLICT (pair_lo, pair_hi) DO UPDATE SET "
    "version = relmerge_pairs.version + 1, "
    "relation_count = relmerge_pairs.relation_count + excluded.relation_count"
)
_INSERT_MEMBER = (
    "INSERT INTO relmerge_members "
    "(batch_seq, position, member_id, relation_id, document_id, origin, joined_seq, record) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_MEMBER_CHUNK = (
    "INSERT INTO relmerge_member_chunks (chunk_id, batch_seq, position) VALUES (?, ?, ?)"
)
_UPSERT_ENTITY = (
    "INSERT INTO relmerge_entities (entity_id, name, type, profile) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (entity_id) DO UPDATE SET name = excluded.name, type = excluded.type, "
    "profile = excluded.profile"
)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def update_values(relation: ExtractedRelation) -> tuple[str, ...]:
    """``_UPDATE_RELATION``'s parameters: the row without its id and pair, then the id."""
    row = relation_row(relation)
    return (*row[3:], row[0])


def bump_pairs(db: Db, deltas: Mapping[Pair, int]) -> None:
    """A new version for each pair (sorted: the same order in every transaction), its
    relation count moved by the delta."""
    db.executemany(_BUMP, [(lo, hi, deltas[(lo, hi)]) for lo, hi in sorted(deltas)])


def _some(ids: Iterable[str]) -> str:
    shown = sorted(ids)
    listed = ", ".join(repr(i) for i in shown[:3])
    return listed + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")


class BatchWrite:
    """The transaction of one batch. ``checked``: the pairs it writes must be among the
    versions it was given (a merge); a load is not checked (it holds the whole store)."""

    def __init__(self, db: Db, batch_id: str, kind: str, checked: Mapping[Pair, int] | None):
        self.db = db
        self.batch_id = batch_id
        self.kind = kind
        self.checked = checked
        self.seq = 0
        self.position = 0
        self.deltas: dict[Pair, int] = {}
        self.counts: dict[str, int] = dict.fromkeys(BatchCounts().to_dict(), 0)
        self.digest = hashlib.sha256()
        self._pending_log: list[tuple[Any, ...]] = []
        self.member_position = 0
        self.inserted: list[ExtractedRelation] = []  # by the last insert() call

    def begin(self, locks: Locks) -> None:
        self.db.dialect.begin_write(self.db, locks)

    def conflicts(self) -> list[Pair]:
        """The pairs whose version moved since the caller read them (held: they cannot
        move again before this transaction ends)."""
        if not self.checked:
            return []
        current = pair_versions(self.db, list(self.checked))
        return sorted(p for p, seen in self.checked.items() if current.get(p, 0) != seen)

    def open(self, fingerprint: str, status: str = "applied") -> None:
        self.seq = int(
            self.db.scalar(
                "INSERT INTO relmerge_batches "
                "(batch_id, kind, fingerprint, status, applied_at, undone_at, counts) "
                "VALUES (?, ?, ?, ?, ?, NULL, ?) RETURNING seq",
                [self.batch_id, self.kind, fingerprint, status, now(), "{}"],
            )
        )

    def _log(self, kind: str, item_id: str, op: str, before: str | None, after: str) -> None:
        self.position += 1
        self._pending_log.append((self.seq, self.position, kind, item_id, op, before, after))

    def _touch(self, pair: Pair, delta: int) -> None:
        if self.checked is not None and pair not in self.checked:
            raise StoreError(
                f"batch {self.batch_id!r} writes the pair {pair} without its version: "
                "read it with relations_for_pairs first and give the version in Batch.versions"
            )
        self.deltas[pair] = self.deltas.get(pair, 0) + delta

    def insert(self, relations: Sequence[ExtractedRelation]) -> None:
        """New relations; one already stored unchanged is counted, with other content it
        refuses the batch."""
        self._pending_log = []
        self.inserted = []
        stored = stored_rows(self.db, [r.relation_id for r in relations])
        rows, taken = [], []
        for relation in relations:
            row = relation_row(relation)
            self.digest.update(row[0].encode() + b"\x00" + relation.to_json() + b"\n")
            if relation.relation_id in stored:
                if row_relation(stored[relation.relation_id]) == relation:
                    self.counts["unchanged"] += 1
                    self._touch(relation_pair(relation), 0)
                else:
                    taken.append(relation.relation_id)
                continue
            stored[relation.relation_id] = row  # a repeat within the chunk is a repeat
            rows.append((*row, self.seq))
            self.inserted.append(relation)
            self._log("relation", relation.relation_id, "insert", None, relation_json(relation))
            self._touch(relation_pair(relation), 1)
        if taken:
            raise RelationIdTakenError(
                f"batch {self.batch_id!r} inserts {len(taken)} relation id(s) the store holds "
                f"with other content ({_some(taken)}); a stored relation keeps its id and "
                "content: give the new relations other ids, or merge them with "
                "`relmerge merge-into`"
            )
        self.db.executemany(_INSERT_RELATION, rows)
        self.db.executemany(_LOG, self._pending_log)
        self.counts["inserted"] += len(rows)

    def _stored(
        self, relation_ids: list[str], verb: str, hint: str = ""
    ) -> dict[str, tuple[Any, ...]]:
        """The stored rows of ``relation_ids``; a batch that ``verb`` one not stored is
        refused."""
        stored = stored_rows(self.db, relation_ids)
        missing = [relation_id for relation_id in relation_ids if relation_id not in stored]
        if missing:
            raise StoreError(
                f"batch {self.batch_id!r} {verb} relation(s) that are not stored "
                f"({_some(missing)}){hint}"
            )
        return stored

    def update(self, relations: Sequence[ExtractedRelation]) -> None:
        """New full records of stored relations (same id, same pair)."""
        self._pending_log = []
        ids = [r.relation_id for r in relations]
        stored = self._stored(ids, "updates", ": insert new relations instead")
        values = []
        for relation in relations:
            row = relation_row(relation)
            before = stored[relation.relation_id]
            if (before[1], before[2]) != (row[1], row[2]):
                raise StoreError(
                    f"batch {self.batch_id!r} moves relation {relation.relation_id!r} to "
                    "another entity pair: a stored relation keeps its endpoints"
                )
            if row_relation(before) == relation:
                self.counts["unchanged"] += 1
                self._touch(relation_pair(relation), 0)
                continue
            stored[relation.relation_id] = row
            values.append(update_values(relation))
            self._log(
                "relation",
                relation.relation_id,
                "update",
                relation_json(row_relation(before)),
                relation_json(relation),
            )
            self._touch(relation_pair(relation), 0)
        self.db.executemany(_UPDATE_RELATION, values)
        self.db.executemany(_LOG, self._pending_log)
        self.counts["updated"] += len(values)

    def absorb(self, absorbed: Mapping[str, str]) -> None:
        """Stored relations folded into a survivor (a reconcile): kept as they are, logged
        (``absorb``, for undo), and no longer counted in their pair."""
        self._pending_log = []
        stored = self._stored(list(absorbed), "absorbs")
        for relation_id in absorbed:
            relation = row_relation(stored[relation_id])
            image = relation_json(relation)
            self._log("relation", relation_id, "absorb", image, image)
            self._touch(relation_pair(relation), -1)
        self.db.executemany(_LOG, self._pending_log)
        self.counts["absorbed"] += len(absorbed)

    def delete(self, relation_ids: Sequence[str]) -> None:
        """Stored relations removed (a retract: none of their members is left); logged
        with their row's place and batch, so that undo puts them back as they were."""
        self._pending_log = []
        stored = self._stored(list(relation_ids), "removes")
        places: dict[str, tuple[int, int]] = {}
        for part in chunks(list(stored)):
            rows = self.db.query(
                "SELECT relation_id, row_seq, inserted_by FROM relmerge_relations "
                f"WHERE relation_id IN ({marks(len(part))})",
                part,
            )
            places.update({i: (int(seq), int(by)) for i, seq, by in rows})
        for relation_id in dict.fromkeys(relation_ids):
            relation = row_relation(stored[relation_id])
            image = relation_json(relation)
            place = orjson.dumps(
                {
                    **orjson.loads(image),
                    "row_seq": places[relation_id][0],
                    "inserted_by": places[relation_id][1],
                }
            ).decode()
            self._log("relation", relation_id, "delete", image, place)
            self._touch(relation_pair(relation), -1)
        self.db.executemany(
            "DELETE FROM relmerge_relations WHERE relation_id = ?",
            [(relation_id,) for relation_id in dict.fromkeys(relation_ids)],
        )
        self.db.executemany(_LOG, self._pending_log)
        self.counts["removed"] += len(set(relation_ids))

    def members(self, members: Sequence[Member]) -> None:
        """Member rows (the records behind the stored relations), each with its chunk ids
        for lookups by chunk; a row taken back keeps only its document for lookups."""
        rows: list[tuple[Any, ...]] = []
        chunk_rows: list[tuple[Any, ...]] = []
        for member in members:
            self.member_position += 1
            record = member.record
            rows.append(
                (
                    self.seq,
                    self.member_position,
                    record.relation_id,
                    member.relation_id,
                    record.document_id,
                    member.origin,
                    member.joined or self.seq,
                    relation_json(record),
                )
            )
            if member.relation_id != RETRACTED:
                chunk_rows.extend(
                    (chunk_id, self.seq, self.member_position)
                    for chunk_id in dict.fromkeys(record.chunk_ids())
                )
        self.db.executemany(_INSERT_MEMBER, rows)
        self.db.executemany(_INSERT_MEMBER_CHUNK, chunk_rows)

    def absorbed_members(self, absorbed: Mapping[str, str]) -> None:
        """A reconcile's absorbed relations' members, moved to their survivor."""
        ids: list[str] = []
        for part in chunks(list(absorbed)):
            ids.extend(
                member_id
                for (member_id,) in self.db.query(
                    "SELECT DISTINCT member_id FROM relmerge_members "
                    f"WHERE relation_id IN ({marks(len(part))})",
                    part,
                )
            )
        moved = [
            Member(
                member.record,
                absorbed[member.relation_id],
                member.origin,
                joined=member.joined,
            )
            for member in sorted(
                current_members(self.db, ids).values(),
                key=lambda member: (member.batch_seq, member.position),
            )
            if member.relation_id in absorbed
        ]
        self.members(moved)

    def entities(self, profiles: Sequence[EntityContext]) -> None:
        """Entity profiles added or replaced (the last of an id wins); logged like
        relations so that undo restores them."""
        self._pending_log = []
        latest = {entity.entity_id: entity for entity in profiles}
        stored = entities(self.db, list(latest))
        rows = []
        for entity_id, entity in latest.items():
            self.digest.update(entity_json(entity).encode() + b"\n")
            before = stored.get(entity_id)
            if before == entity:
                continue
            rows.append(entity_row(entity))
            op = "insert" if before is None else "update"
            old = None if before is None else entity_json(before)
            self._log("entity", entity_id, op, old, entity_json(entity))
        self.db.executemany(_UPSERT_ENTITY, rows)
        self.db.executemany(_LOG, self._pending_log)
        self.counts["entities"] += len(rows)

    def map(self, mapping: Iterable[tuple[str, str]]) -> None:
        rows = [(self.seq, input_id, relation_id) for input_id, relation_id in mapping]
        self.db.executemany(
            "INSERT INTO relmerge_mapping (batch_seq, input_id, relation_id) VALUES (?, ?, ?)",
            rows,
        )
        self.counts["mapped"] += len(rows)

    def mapped_pairs(self, pairs: Iterable[Pair]) -> None:
        """Pairs the mapping folds input ids into: their version moves too, so that a
        reader deciding the same input ids conflicts instead of deciding them again."""
        for pair in pairs:
            self.deltas.setdefault(pair, 0)

    def decisions(self, decisions: Sequence[Mapping[str, Any]]) -> None:
        start = self.counts["decisions"]
        rows = [
            (self.seq, start + index, orjson.dumps(decision).decode())
            for index, decision in enumerate(decisions, start=1)
        ]
        self.db.executemany(
            "INSERT INTO relmerge_decisions (batch_seq, position, line) VALUES (?, ?, ?)", rows
        )
        self.counts["decisions"] += len(rows)

    def finish(self, batch_id: str | None = None, fingerprint: str | None = None) -> BatchCounts:
        """Bump the touched pairs, record the counts (and, for a load, the id and
        fingerprint its content gave it), commit."""
        bump_pairs(self.db, self.deltas)
        counts = BatchCounts(**self.counts)
        self.db.execute(
            "UPDATE relmerge_batches SET batch_id = ?, fingerprint = COALESCE(?, fingerprint), "
            "status = 'applied', counts = ? WHERE seq = ?",
            [
                batch_id or self.batch_id,
                fingerprint,
                orjson.dumps(counts.to_dict()).decode(),
                self.seq,
            ],
        )
        self.db.commit()
        return counts

    def already(self, batch_id: str | None = None) -> BatchCounts | None:
        """The counts of an earlier application of this batch id, if there is one."""
        record = applied_batch(self.db, batch_id or self.batch_id)
        return None if record is None else record.counts

    def abort(self) -> None:
        self.db.rollback()


def missing_targets(db: Db, relation_ids: Sequence[str]) -> list[str]:
    """The relation ids among these that are not stored."""
    found = stored_rows(db, relation_ids)
    return [relation_id for relation_id in relation_ids if relation_id not in found]
