"""A store's schema: created once, its version checked before any other use; and the
other keys of its ``relmerge_meta`` table.

The version lives in ``relmerge_meta``. A store made by another relmerge, older or newer,
is refused with what to do; a database without the table is not a store yet. Other keys
(a model's canary window, ``relmerge.run.store_canaries``) are text a newer relmerge may
add without a new schema version: an older one never reads them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from relmerge.errors import StoreSchemaError
from relmerge.graphstore.base import lock_key
from relmerge.graphstore.db import Db, Locks
from relmerge.graphstore.schema import META_TABLE, SCHEMA_VERSION, create_statements
from relmerge.graphstore.writes import now
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
            where = f" (its database holds {others} other tables)" if others else ""
            raise StoreSchemaError(
                f"no relmerge store at {url}{where}: create one with `relmerge store init {url}`"
            )
        found = _version(db)
    problem = schema_problem(url, found)
    if problem is not None:
        raise StoreSchemaError(problem)


def create_schema(db: Db, url: str) -> bool:
    """Create the tables and record the version, in one transaction (concurrent inits
    wait for each other); False when the store was there already."""
    db.dialect.begin_write(db, Locks(exclusive=True))
    try:
        if db.dialect.has_table(db, META_TABLE):
            problem = schema_problem(url, _version(db))
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
