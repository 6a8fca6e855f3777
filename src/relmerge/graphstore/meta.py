"""A store's schema: created once, its version checked before any other use; and the
other keys of its ``relmerge_meta`` table.

The version lives in ``relmerge_meta``. A store made by another relmerge, older or newer,
is refused with what to do; a database without the table is not a store yet. Other keys
(a model's canary window, ``relmerge.run.store_canaries``) are text a newer relmerge may
add without a new schema version: an older one never reads them.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

from relmerge.errors import StoreSchemaError
from relmerge.graphstore.base import lock_key
from relmerge.graphstore.db import Db, Locks, chunks, marks
from relmerge.graphstore.reads import resolve
from relmerge.graphstore.schema import (
    META_TABLE,
    MIGRATES_FROM,
    RELATION_COLUMNS,
    SCHEMA_VERSION,
    create_statements,
    relation_json,
    row_relation,
)
from relmerge.graphstore.writes import _INSERT_MEMBER, _INSERT_MEMBER_CHUNK, now
from relmerge.version import __version__


def schema_problem(url: str, found: Any) -> str | None:
    """Why a store whose meta says ``found`` cannot be used, or None."""
    if found == str(SCHEMA_VERSION):
        return None
    try:
        version = int(found)
    except (TypeError, ValueError):
        return (
            f"the store at {url} has an unknown schema version {found!r}: "
            "it was not made by relmerge, or was damaged"
        )
    if version > SCHEMA_VERSION:
        return (
            f"the store at {url} has schema version {version}, newer than the version "
            f"{SCHEMA_VERSION} of relmerge {__version__}: upgrade relmerge "
            "(pip install -U relmerge)"
        )
    return (
        f"the store at {url} has schema version {version}, older than the version "
        f"{SCHEMA_VERSION} of relmerge {__version__}: dump it with the relmerge that made it "
        "(`relmerge store dump`) and load the dump into a new store"
    )


def _version(db: Db) -> Any:
    return db.scalar("SELECT value FROM relmerge_meta WHERE key = 'schema_version'")


def check_schema(db: Db, url: str) -> None:
    """Raise :class:`~relmerge.errors.StoreSchemaError` unless ``db`` holds a store of
    this relmerge's schema version."""
    with db.reading():
        if not db.dialect.has_table(db, META_TABLE):
            others = db.dialect.table_count(db)
            tables = "1 other table" if others == 1 else f"{others} other tables"
            where = f" (its database holds {tables})" if others else ""
            raise StoreSchemaError(
                f"no relmerge store at {url}{where}: create one with "
                f"`relmerge store init {shlex.quote(url)}`"
            )
        found = _version(db)
    if found == str(MIGRATES_FROM):
        migrate(db)
        return
    problem = schema_problem(url, found)
    if problem is not None:
        raise StoreSchemaError(problem)


MIGRATE_PAGE = 1000


def migrate(db: Db) -> None:
    """Upgrade a store of schema version 1 in place, in one transaction that holds the
    whole store (a second process waits, then finds it done): the member tables are
    added and every stored relation becomes its own member, ``input`` where no other
    input id maps to it, else ``opaque`` (its members were not kept one by one: a
    retract keeps its wording and says so). An absorbed relation's member joins its
    survivor."""
    db.dialect.begin_write(db, Locks(exclusive=True))
    try:
        if _version(db) != str(MIGRATES_FROM):
            db.rollback()
            return
        for statement in create_statements(db.dialect.types):
            db.execute(statement)
        after = 0
        while True:
            rows = db.query(
                f"SELECT row_seq, inserted_by, {RELATION_COLUMNS} FROM relmerge_relations "
                "WHERE row_seq > ? ORDER BY row_seq LIMIT ?",
                [after, MIGRATE_PAGE],
            )
            if not rows:
                break
            _migrate_page(db, [(int(r[0]), int(r[1]), row_relation(r[2:])) for r in rows])
            after = int(rows[-1][0])
        db.execute(
            "UPDATE relmerge_meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)]
        )
        db.execute(
            "INSERT INTO relmerge_meta (key, value) VALUES ('migrated_at', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [now()],
        )
        db.commit()
    except BaseException:
        db.rollback()
        raise


def _migrate_page(db: Db, page: list[tuple[int, int, Any]]) -> None:
    ids = [relation.relation_id for _, _, relation in page]
    opaque: set[str] = set()
    for part in chunks(ids):
        opaque.update(
            relation_id
            for (relation_id,) in db.query(
                "SELECT DISTINCT m.relation_id FROM relmerge_mapping m "
                "JOIN relmerge_batches b ON b.seq = m.batch_seq "
                "WHERE b.status = 'applied' AND m.input_id <> m.relation_id "
                f"AND m.relation_id IN ({marks(len(part))})",
                part,
            )
        )
    into = resolve(db, ids)
    members, member_chunks = [], []
    for row_seq, batch_seq, relation in page:
        relation_id = relation.relation_id
        origin = "opaque" if relation_id in opaque else "input"
        members.append(
            (
                batch_seq,
                row_seq,
                relation_id,
                into[relation_id],
                relation.document_id,
                origin,
                batch_seq,
                relation_json(relation),
            )
        )
        member_chunks += [(c, batch_seq, row_seq) for c in dict.fromkeys(relation.chunk_ids())]
    db.executemany(_INSERT_MEMBER, members)
    db.executemany(_INSERT_MEMBER_CHUNK, member_chunks)


def create_schema(db: Db, url: str) -> bool:
    """Create the tables and record the version, in one transaction (concurrent inits
    wait for each other); False when the store was there already."""
    db.dialect.begin_write(db, Locks(exclusive=True))
    try:
        if db.dialect.has_table(db, META_TABLE):
            found = _version(db)
            if found == str(MIGRATES_FROM):
                db.rollback()
                migrate(db)
                return False
            problem = schema_problem(url, found)
            if problem is not None:
                raise StoreSchemaError(problem)
            db.rollback()
            return False
        for statement in create_statements(db.dialect.types):
            db.execute(statement)
        db.executemany(
            "INSERT INTO relmerge_meta (key, value) VALUES (?, ?)",
            [
                ("schema_version", str(SCHEMA_VERSION)),
                ("created_at", now()),
                ("created_by", f"relmerge {__version__}"),
            ],
        )
        db.commit()
    except BaseException:
        db.rollback()
        raise
    return True


def meta_value(db: Db, key: str) -> str | None:
    """The text kept under ``key`` (None: nothing yet)."""
    value = db.scalar("SELECT value FROM relmerge_meta WHERE key = ?", [key])
    return None if value is None else str(value)


def update_meta(db: Db, key: str, change: Callable[[str | None], str]) -> str:
    """``key``'s text replaced by ``change`` of it, in one write transaction that holds
    ``key`` (two merges that add to one value never lose an addition); the new text."""
    db.dialect.begin_write(db, Locks(keys=(lock_key("meta", key),)))
    try:
        value = change(meta_value(db, key))
        db.execute(
            "INSERT INTO relmerge_meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [key, value],
        )
        db.commit()
    except BaseException:
        db.rollback()
        raise
    return value
