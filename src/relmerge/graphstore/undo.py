"""Undoing a batch from its change log: every item back to its before image, in one
transaction.

A batch's log gives, for each relation and entity it changed, the image before its first
change (none: the batch inserted it). Undo writes those back and deletes what the batch
inserted. It is refused when a later applied batch changed one of the same items, or maps
input ids to a relation this batch inserted: undoing under it would rewrite or orphan the
later batch's work. Undo the later batches first (newest first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from relmerge.errors import BatchNotFoundError, UndoRefusedError
from relmerge.graphstore.base import BatchRecord, Pair, pair_of
from relmerge.graphstore.db import Db, Locks, marks
from relmerge.graphstore.reads import latest_batch
from relmerge.graphstore.schema import (
    RELATION_COLUMNS,
    entity_row,
    json_entity,
    json_relation,
    relation_row,
)
from relmerge.graphstore.writes import _UPSERT_ENTITY, bump_pairs, now, update_values

_LATER = """
SELECT b.seq, b.batch_id FROM relmerge_changes later
JOIN relmerge_changes mine ON mine.kind = later.kind AND mine.item_id = later.item_id
JOIN relmerge_batches b ON b.seq = later.batch_seq
WHERE mine.batch_seq = ? AND later.batch_seq > ? AND b.status = 'applied'
UNION
SELECT b.seq, b.batch_id FROM relmerge_mapping m
JOIN relmerge_changes mine ON mine.item_id = m.relation_id
JOIN relmerge_batches b ON b.seq = m.batch_seq
WHERE mine.batch_seq = ? AND mine.kind = 'relation' AND mine.op = 'insert'
  AND m.batch_seq > ? AND b.status = 'applied'
ORDER BY 1
"""


@dataclass(frozen=True)
class Change:
    kind: str  # relation | entity
    item_id: str
    before: str | None  # None: inserted by the batch
    pair: Pair | None  # a relation's pair
    op: str = "update"  # insert | update | absorb (a reconcile: the row was kept) | delete
    after: str = ""  # a delete's: the row's place (row_seq, inserted_by) with its image


@dataclass(frozen=True)
class UndoPlan:
    record: BatchRecord
    changes: tuple[Change, ...]  # one per item: its first change in the batch

    def locks(self) -> Locks:
        return Locks.of(
            batch_id=self.record.batch_id,
            pairs=[c.pair for c in self.changes if c.pair is not None],
            entities=[c.item_id for c in self.changes if c.kind == "entity"],
        )


def plan(db: Db, batch_id: str) -> UndoPlan:
    """What undoing ``batch_id`` restores (read in its own snapshot, before any lock)."""
    with db.reading():
        record = latest_batch(db, batch_id)
        if record is None:
            raise BatchNotFoundError(
                f"no batch {batch_id!r} in the store {db.dialect.url}: "
                "`relmerge store info URL` lists the last batches"
            )
        rows = db.query(
            "SELECT kind, item_id, before, after, op FROM relmerge_changes "
            "WHERE batch_seq = ? ORDER BY position",
            [record.seq],
        )
    first: dict[tuple[str, str], Change] = {}
    for kind, item_id, before, after, op in rows:
        if (kind, item_id) not in first:
            first[(kind, item_id)] = Change(kind, item_id, before, _pair(kind, after), op, after)
    return UndoPlan(record, tuple(first.values()))


def _pair(kind: str, image: str) -> Pair | None:
    if kind != "relation":
        return None
    data: dict[str, Any] = orjson.loads(image)
    return pair_of(data["source_entity_id"], data["target_entity_id"])


def still_applied(db: Db, undo: UndoPlan) -> bool:
    """Under the locks: the batch has not been undone meanwhile."""
    record = latest_batch(db, undo.record.batch_id)
    return record is not None and record.seq == undo.record.seq and record.status == "applied"


def check(db: Db, undo: UndoPlan) -> None:
    """``refuse_if_later`` in a snapshot of its own, changing nothing: whether an undo
    would be refused now (a merge asks before it claims its output folder)."""
    with db.reading():
        refuse_if_later(db, undo)


def refuse_if_later(db: Db, undo: UndoPlan) -> None:
    seq = undo.record.seq
    later = [batch_id for _, batch_id in db.query(_LATER, [seq, seq, seq, seq])]
    if later:
        names = ", ".join(later)
        raise UndoRefusedError(
            f"cannot undo batch {undo.record.batch_id!r}: later batch(es) {names} changed "
            "the same relations or map ids to relations it inserted; undo those first, "
            "newest first",
            later,
        )


def restore(db: Db, undo: UndoPlan) -> tuple[int, int]:
    """Write the before images back, delete what was inserted, mark the batch undone,
    commit. Returns (relations removed, relations restored). A relation a reconcile
    absorbed was kept as it was: it counts in its pair again (the reads see it again as
    the batch is marked undone); one a retract removed is put back in its place. The
    batch's member and mapping rows stay, read no more once it is marked undone."""
    deltas: dict[Pair, int] = {}
    relations = [c for c in undo.changes if c.kind == "relation"]
    removed = [c for c in relations if c.before is None]
    absorbed = [c for c in relations if c.op == "absorb"]
    deleted = [c for c in relations if c.op == "delete"]
    restored = [c for c in relations if c.before is not None and c.op not in ("absorb", "delete")]
    db.executemany(
        "DELETE FROM relmerge_relations WHERE relation_id = ?", [(c.item_id,) for c in removed]
    )
    db.executemany(
        "UPDATE relmerge_relations SET chunk_id = ?, document_id = ?, source_entity_id = ?, "
        "target_entity_id = ?, source_entity_name = ?, target_entity_name = ?, type = ?, "
        "name = ?, description = ?, attributes = ?, source_chunk_ids = ? WHERE relation_id = ?",
        [update_values(json_relation(c.before)) for c in restored if c.before is not None],
    )
    db.executemany(
        f"INSERT INTO relmerge_relations (row_seq, {RELATION_COLUMNS}, inserted_by) "
        f"{db.dialect.identity_override} VALUES ({marks(16)})",
        [_placed_row(c) for c in deleted],
    )
    for change in removed + restored + absorbed + deleted:
        assert change.pair is not None
        step = 1 if change.op in ("absorb", "delete") else -(change.before is None)
        deltas[change.pair] = deltas.get(change.pair, 0) + step
    entities = [c for c in undo.changes if c.kind == "entity"]
    db.executemany(
        "DELETE FROM relmerge_entities WHERE entity_id = ?",
        [(c.item_id,) for c in entities if c.before is None],
    )
    db.executemany(
        _UPSERT_ENTITY,
        [entity_row(json_entity(c.before)) for c in entities if c.before is not None],
    )
    bump_pairs(db, deltas)
    db.execute(
        "UPDATE relmerge_batches SET status = 'undone', undone_at = ? WHERE seq = ?",
        [now(), undo.record.seq],
    )
    db.commit()
    return len(removed), len(restored) + len(absorbed) + len(deleted)


def _placed_row(change: Change) -> tuple[Any, ...]:
    """A removed relation's row as it was: its place in the dump order and its batch."""
    assert change.before is not None
    place = orjson.loads(change.after)
    return (place["row_seq"], *relation_row(json_relation(change.before)), place["inserted_by"])
