"""The store's reads: lookups by pair, by id, by input id; batches; counts; pages of a dump.

Each function runs inside a transaction its caller began (one snapshot), and batches its
lookups: one statement per :data:`~relmerge.graphstore.db.CHUNK` keys, never one per key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import orjson

from relmerge.graphstore.base import (
    RETRACTED,
    BatchCounts,
    BatchRecord,
    Member,
    Pair,
    PairState,
    pair_of,
)
from relmerge.graphstore.db import Db, chunks, marks
from relmerge.graphstore.schema import (
    ENTITY_COLUMNS,
    RELATION_COLUMNS,
    json_relation,
    row_entity,
    row_relation,
)
from relmerge.model import EntityContext, ExtractedRelation

BATCH_COLUMNS = "seq, batch_id, kind, fingerprint, status, applied_at, undone_at, counts"
# A stored relation ``r`` an applied reconcile did not absorb (absorbed ones are kept,
# never read). NOT EXISTS, not NOT IN: PostgreSQL plans ``NOT IN (subquery)`` as a
# filter over a sequential scan, which turned the pair lookups of a 10k merge into a
# store of 1M from an index join into a scan of the whole table (18 s instead of 2).
NOT_ABSORBED = (
    "NOT EXISTS (SELECT 1 FROM relmerge_mapping m "
    "JOIN relmerge_batches b ON b.seq = m.batch_seq "
    "WHERE m.input_id = r.relation_id AND b.kind = 'reconcile' AND b.status = 'applied')"
)
ANY_RECONCILED = (
    "SELECT 1 FROM relmerge_batches WHERE kind = 'reconcile' AND status = 'applied' LIMIT 1"
)
# A batch whose mapping moves a stored id to another (a reconcile absorbs, a retract
# renames a relation whose id came from a member it took back).
ANY_MOVED = (
    "SELECT 1 FROM relmerge_batches WHERE kind IN ('reconcile', 'retract') "
    "AND status = 'applied' LIMIT 1"
)
RECONCILED = "reconciled_through"  # the decision line an applied reconcile covers up to
RESOLVE_LIMIT = 64  # reconciles chained over one id: more means a cycle (never written)


def _pairs_values(count: int) -> str:
    return ", ".join(["(?, ?)"] * count)


def pair_versions(db: Db, pairs: Sequence[Pair]) -> dict[Pair, int]:
    """The version of each pair that has one (pairs never touched are left out)."""
    found: dict[Pair, int] = {}
    for part in chunks(list(pairs)):
        rows = db.query(
            "WITH wanted (lo, hi) AS (VALUES "
            + _pairs_values(len(part))
            + ") SELECT p.pair_lo, p.pair_hi, p.version FROM wanted "
            "JOIN relmerge_pairs p ON p.pair_lo = wanted.lo AND p.pair_hi = wanted.hi",
            [value for pair in part for value in pair],
        )
        found.update({(lo, hi): int(version) for lo, hi, version in rows})
    return found


def pair_states(db: Db, pairs: Sequence[Pair]) -> dict[Pair, PairState]:
    """Every asked pair (canonical) with its version and relations in stored order.

    Versions are read before relations: should anything move in between (it cannot in a
    snapshot, but a reader without one would see it), the versions are the older, and a
    batch built on them conflicts instead of overwriting.
    """
    wanted = list(dict.fromkeys(pair_of(*pair) for pair in pairs))
    versions = pair_versions(db, wanted)
    found: dict[Pair, list[ExtractedRelation]] = {pair: [] for pair in wanted}
    reconciled = bool(wanted) and bool(db.query(ANY_RECONCILED))  # most stores: never
    for part in chunks(wanted):
        sql = pair_relations_sql(len(part), reconciled)
        rows = db.query(sql, [value for pair in part for value in pair])
        for row in rows:
            found[(row[1], row[2])].append(row_relation(row))
    return {pair: PairState(pair, versions.get(pair, 0), tuple(found[pair])) for pair in wanted}


def pair_relations_sql(count: int, reconciled: bool = True) -> str:
    """The relations of ``count`` pairs in one statement: a join on the pair index
    (``reconciled``: the store has an applied reconcile, whose absorbed ones are left out)."""
    return (
        f"WITH wanted (lo, hi) AS (VALUES {_pairs_values(count)}) "
        f"SELECT {_prefixed('r', RELATION_COLUMNS)} FROM wanted "
        "JOIN relmerge_relations r ON r.pair_lo = wanted.lo AND r.pair_hi = wanted.hi "
        + (f"WHERE {NOT_ABSORBED} " if reconciled else "")
        + "ORDER BY r.row_seq"
    )


def _prefixed(alias: str, columns: str) -> str:
    return ", ".join(f"{alias}.{column.strip()}" for column in columns.split(","))


def stored_rows(db: Db, relation_ids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
    """The rows (:data:`RELATION_COLUMNS`) of the stored relations among ``relation_ids``."""
    found: dict[str, tuple[Any, ...]] = {}
    for part in chunks(list(dict.fromkeys(relation_ids))):
        rows = db.query(
            f"SELECT {RELATION_COLUMNS} FROM relmerge_relations "
            f"WHERE relation_id IN ({marks(len(part))})",
            part,
        )
        found.update({row[0]: row for row in rows})
    return found


def relations_by_id(db: Db, relation_ids: Sequence[str]) -> dict[str, ExtractedRelation]:
    """The stored relations asked for by id; an absorbed id gives its survivor."""
    now = resolve(db, relation_ids)
    rows = stored_rows(db, list(now.values()))
    return {asked: row_relation(rows[now[asked]]) for asked in now if now[asked] in rows}


def absorbed_into(db: Db, relation_ids: Sequence[str]) -> dict[str, str]:
    """Absorbed id -> survivor id, for the ids among these an applied reconcile absorbed
    (or an applied retract renamed; one it took back maps to nothing: left out)."""
    found: dict[str, str] = {}
    for part in chunks(list(dict.fromkeys(relation_ids))):
        rows = db.query(
            "SELECT m.input_id, m.relation_id FROM relmerge_mapping m "
            "JOIN relmerge_batches b ON b.seq = m.batch_seq "
            "WHERE b.kind IN ('reconcile', 'retract') AND b.status = 'applied' "
            f"AND m.relation_id <> '' AND m.input_id IN ({marks(len(part))})",
            part,
        )
        found.update({absorbed: survivor for absorbed, survivor in rows if absorbed != survivor})
    return found


def resolve(db: Db, relation_ids: Sequence[str]) -> dict[str, str]:
    """Each id -> the stored id that stands for it now (itself, unless a reconcile
    absorbed it: then its survivor, through later reconciles too)."""
    now = {relation_id: relation_id for relation_id in relation_ids}
    if not now or not db.query(ANY_MOVED):
        return now  # one look: most stores never had a reconcile or retract applied
    for _ in range(RESOLVE_LIMIT):
        moved = absorbed_into(db, list(set(now.values())))
        if not moved:
            break
        now = {asked: moved.get(current, current) for asked, current in now.items()}
    return now


def entities(db: Db, entity_ids: Sequence[str]) -> dict[str, EntityContext]:
    found: dict[str, EntityContext] = {}
    for part in chunks(list(dict.fromkeys(entity_ids))):
        rows = db.query(
            f"SELECT {ENTITY_COLUMNS} FROM relmerge_entities "
            f"WHERE entity_id IN ({marks(len(part))})",
            part,
        )
        found.update({row[0]: row_entity(row) for row in rows})
    return found


def folded(db: Db, input_ids: Sequence[str]) -> dict[str, str]:
    """Input id -> stored id by the applied batches; the latest batch wins."""
    found: dict[str, tuple[int, str]] = {}
    for part in chunks(list(dict.fromkeys(input_ids))):
        rows = db.query(
            "SELECT m.input_id, m.relation_id, m.batch_seq FROM relmerge_mapping m "
            "JOIN relmerge_batches b ON b.seq = m.batch_seq "
            f"WHERE b.status = 'applied' AND m.input_id IN ({marks(len(part))})",
            part,
        )
        for input_id, relation_id, seq in rows:
            if input_id not in found or found[input_id][0] < seq:
                found[input_id] = (int(seq), relation_id)
    found = {i: seen for i, seen in found.items() if seen[1] != RETRACTED}  # taken back
    now = resolve(db, [relation_id for _, relation_id in found.values()])
    return {input_id: now[relation_id] for input_id, (_, relation_id) in found.items()}


def batch_record(row: tuple[Any, ...]) -> BatchRecord:
    seq, batch_id, kind, fingerprint, status, applied_at, undone_at, counts = row
    return BatchRecord(
        batch_id=batch_id,
        seq=int(seq),
        kind=kind,
        fingerprint=fingerprint,
        status=status,
        applied_at=applied_at,
        undone_at=undone_at,
        counts=BatchCounts(**orjson.loads(counts)),
    )


def latest_batch(db: Db, batch_id: str) -> BatchRecord | None:
    rows = db.query(
        f"SELECT {BATCH_COLUMNS} FROM relmerge_batches WHERE batch_id = ? "
        "ORDER BY seq DESC LIMIT 1",
        [batch_id],
    )
    return batch_record(rows[0]) if rows else None


def applied_batch(db: Db, batch_id: str) -> BatchRecord | None:
    rows = db.query(
        f"SELECT {BATCH_COLUMNS} FROM relmerge_batches WHERE batch_id = ? AND status = 'applied'",
        [batch_id],
    )
    return batch_record(rows[0]) if rows else None


def batch_mapping(db: Db, seq: int) -> dict[str, str]:
    rows = db.query("SELECT input_id, relation_id FROM relmerge_mapping WHERE batch_seq = ?", [seq])
    return dict(rows)


def batch_decisions(db: Db, seq: int) -> list[dict[str, Any]]:
    rows = db.query(
        "SELECT line FROM relmerge_decisions WHERE batch_seq = ? ORDER BY position", [seq]
    )
    return [orjson.loads(line) for (line,) in rows]


def counts(db: Db) -> dict[str, int]:
    return {
        "relations": int(
            db.scalar(f"SELECT count(*) FROM relmerge_relations r WHERE {NOT_ABSORBED}")
        ),
        "pairs": int(db.scalar("SELECT count(*) FROM relmerge_pairs WHERE relation_count > 0")),
        "entities": int(db.scalar("SELECT count(*) FROM relmerge_entities")),
        "batches": int(db.scalar("SELECT count(*) FROM relmerge_batches WHERE status = 'applied'")),
    }


def last_batches(db: Db, last: int) -> list[BatchRecord]:
    rows = db.query(
        f"SELECT {BATCH_COLUMNS} FROM relmerge_batches ORDER BY seq DESC LIMIT ?", [last]
    )
    return [batch_record(row) for row in rows]


def dump_page(db: Db, after: int, size: int) -> list[tuple[int, ExtractedRelation]]:
    """Up to ``size`` relations stored after ``row_seq`` ``after``, in stored order (keyset
    pages: each page is an index range, however large the store)."""
    rows = db.query(
        f"SELECT row_seq, {RELATION_COLUMNS} FROM relmerge_relations r WHERE row_seq > ? "
        f"AND {NOT_ABSORBED} ORDER BY row_seq LIMIT ?",
        [after, size],
    )
    return [(int(row[0]), row_relation(row[1:])) for row in rows]


def reconciled(db: Db) -> tuple[int, list[Pair]]:
    """The newest batch the last applied reconcile covered (0: none) and the pairs it
    left open, from its ``reconciled_through`` decision line."""
    rows = db.query(
        "SELECT d.line FROM relmerge_decisions d "
        "JOIN relmerge_batches b ON b.seq = d.batch_seq "
        "WHERE b.kind = 'reconcile' AND b.status = 'applied' AND d.line LIKE ? "
        "ORDER BY b.seq DESC LIMIT 1",
        ['{"' + RECONCILED + '"%'],
    )
    if not rows:
        return 0, []
    line = orjson.loads(rows[0][0])
    return int(line[RECONCILED]), [pair_of(lo, hi) for lo, hi in line.get("open_pairs", [])]


def changes_since(db: Db, since: int) -> tuple[list[Pair], int]:
    """The pairs of the relations applied batches after ``since`` inserted or changed
    (reconciles aside: what they wrote they had decided), and the newest such batch."""
    through = int(
        db.scalar(
            "SELECT COALESCE(MAX(seq), 0) FROM relmerge_batches "
            "WHERE status = 'applied' AND kind <> 'reconcile'"
        )
    )
    rows = db.query(
        "SELECT DISTINCT r.pair_lo, r.pair_hi FROM relmerge_changes c "
        "JOIN relmerge_batches b ON b.seq = c.batch_seq "
        "JOIN relmerge_relations r ON r.relation_id = c.item_id "
        "WHERE c.kind = 'relation' AND b.status = 'applied' AND b.kind <> 'reconcile' "
        "AND b.seq > ? AND b.seq <= ? ORDER BY r.pair_lo, r.pair_hi",
        [since, through],
    )
    return [(lo, hi) for lo, hi in rows], through


def vectors(db: Db, embedder: str, digests: Sequence[bytes]) -> dict[bytes, bytes]:
    found: dict[bytes, bytes] = {}
    for part in chunks(list(dict.fromkeys(digests))):
        rows = db.query(
            "SELECT digest, vector FROM relmerge_vectors "
            f"WHERE embedder = ? AND digest IN ({marks(len(part))})",
            [embedder, *part],
        )
        found.update({bytes(digest): bytes(vector) for digest, vector in rows})
    return found


def vector_digest(text: str) -> bytes:
    """The key of a text in the embedding cache (16 bytes of sha256 keep the index small)."""
    return hashlib.sha256(text.encode()).digest()[:16]


def pairs_of_relations(db: Db, relation_ids: Sequence[str]) -> dict[str, Pair]:
    """The pair of each stored relation among ``relation_ids`` (a relation never changes
    pair, so what is read here holds after any lock is taken)."""
    found: dict[str, Pair] = {}
    with db.reading():
        for part in chunks(list(relation_ids)):
            rows = db.query(
                "SELECT relation_id, pair_lo, pair_hi FROM relmerge_relations "
                f"WHERE relation_id IN ({marks(len(part))})",
                part,
            )
            found.update({relation_id: (lo, hi) for relation_id, lo, hi in rows})
    return found


MEMBER_COLUMNS = (
    "m.batch_seq, m.position, m.member_id, m.relation_id, m.origin, m.joined_seq, m.record"
)


def current_members(db: Db, member_ids: Sequence[str]) -> dict[str, Member]:
    """Each member id's latest row in an applied batch (one taken back included: its
    ``relation_id`` is :data:`~relmerge.graphstore.base.RETRACTED`)."""
    found: dict[str, Member] = {}
    for part in chunks(list(dict.fromkeys(member_ids))):
        rows = db.query(
            f"SELECT {MEMBER_COLUMNS} FROM relmerge_members m "
            "JOIN relmerge_batches b ON b.seq = m.batch_seq "
            f"WHERE b.status = 'applied' AND m.member_id IN ({marks(len(part))})",
            part,
        )
        for seq, position, member_id, relation_id, origin, joined, record in rows:
            seen = found.get(member_id)
            if seen is None or (seen.batch_seq, seen.position) < (int(seq), int(position)):
                found[member_id] = Member(
                    json_relation(record), relation_id, origin, int(seq), int(position), int(joined)
                )
    return found


def _member_ids(db: Db, sql: str, keys: Sequence[str]) -> list[str]:
    ids: list[str] = []
    for part in chunks(list(dict.fromkeys(keys))):
        ids.extend(member_id for (member_id,) in db.query(sql.format(marks(len(part))), part))
    return ids


def members(
    db: Db, documents: Sequence[str], chunk_ids: Sequence[str], relation_ids: Sequence[str]
) -> list[Member]:
    """The current members (not taken back) with one of ``documents`` or ``chunk_ids``
    in their record, or folded into one of ``relation_ids``: candidates by index, then
    each member id's latest row checked again (an older row may have matched)."""
    ids = _member_ids(
        db, "SELECT DISTINCT member_id FROM relmerge_members WHERE document_id IN ({})", documents
    )
    ids += _member_ids(
        db,
        "SELECT DISTINCT m.member_id FROM relmerge_member_chunks c JOIN relmerge_members m "
        "ON m.batch_seq = c.batch_seq AND m.position = c.position WHERE c.chunk_id IN ({})",
        chunk_ids,
    )
    ids += _member_ids(
        db,
        "SELECT DISTINCT member_id FROM relmerge_members WHERE relation_id IN ({})",
        relation_ids,
    )
    wanted_documents, wanted_chunks = set(documents), set(chunk_ids)
    wanted_relations = set(relation_ids)
    kept = [
        member
        for member in current_members(db, ids).values()
        if member.relation_id != RETRACTED
        and (
            member.record.document_id in wanted_documents
            or member.relation_id in wanted_relations
            or not wanted_chunks.isdisjoint(member.record.chunk_ids())
        )
    ]
    return sorted(kept, key=lambda member: (member.batch_seq, member.position))
