"""One database connection as the store's SQL sees it, whatever the dialect.

The store's SQL is written once, with ``?`` placeholders; a :class:`Dialect` says how to
connect, how to begin a read or a locked write transaction, and how to turn a driver's
error into a one-line :class:`~relmerge.errors.StoreError`. Everything here is
synchronous and runs on the store's worker thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, Protocol

from relmerge.errors import StoreError
from relmerge.graphstore.base import Pair, lock_key, pair_of, stripe_key
from relmerge.graphstore.schema import Types

CHUNK = 250
"""Items per statement in batched lookups: well under SQLite's oldest limit of 999 host
parameters with two per pair, and few enough round trips for 10k pairs."""


@dataclass(frozen=True)
class Locks:
    """What a write transaction holds until it ends: the whole store (``exclusive``: a
    load), or its share of it plus ``keys`` (batch id; stripes of entity and new relation
    ids) and the rows of ``pairs``, each taken in ascending order so that two writers
    never wait on each other in a cycle."""

    keys: tuple[int, ...] = ()
    pairs: tuple[Pair, ...] = ()
    exclusive: bool = False

    @classmethod
    def of(
        cls,
        batch_id: str | None = None,
        pairs: Iterable[Pair] = (),
        entities: Iterable[str] = (),
        relations: Iterable[str] = (),
        exclusive: bool = False,
    ) -> Locks:
        keys = {stripe_key("entity", entity) for entity in entities}
        keys |= {stripe_key("relation", relation) for relation in relations}
        if batch_id is not None:
            keys.add(lock_key("batch", batch_id))
        canonical = {pair_of(*pair) for pair in pairs}
        return cls(tuple(sorted(keys)), tuple(sorted(canonical)), exclusive)


class Connection(Protocol):
    """What the store uses of a DB-API connection (sqlite3 and psycopg alike)."""

    def cursor(self) -> Any: ...

    def close(self) -> None: ...


class Dialect(Protocol):
    """What differs between SQLite and PostgreSQL."""

    name: str
    types: Types
    url: str  # password hidden
    statistics_sql: str  # refreshes the query planner's statistics (after a large load)
    identity_override: str  # lets an INSERT give the numbered key (undo of a retract)

    def connect(self, create: bool) -> Connection:
        """Open a connection; ``create``: a missing SQLite file may be made (init only)."""
        ...

    def sql(self, text: str) -> str:
        """``?`` placeholders as the driver wants them."""
        ...

    def begin_read(self, db: Db) -> None:
        """Begin a transaction that sees one snapshot."""
        ...

    def begin_write(self, db: Db, locks: Locks) -> None:
        """Begin a write transaction holding ``locks``."""
        ...

    def has_table(self, db: Db, name: str) -> bool: ...

    def table_count(self, db: Db) -> int:
        """How many tables the database (or its current schema) holds."""
        ...

    def is_broken(self, connection: Connection) -> bool:
        """Whether the connection is gone (a server restarted): it is then opened anew."""
        ...

    def store_error(self, error: BaseException) -> StoreError | None:
        """The one-line error for a driver error (None: not the driver's)."""
        ...


class Db:
    """A connection and its dialect: ``?`` SQL in, plain tuples out."""

    def __init__(self, dialect: Dialect, connection: Connection) -> None:
        self.dialect = dialect
        self.connection = connection
        self._sql: dict[str, str] = {}

    def _text(self, sql: str) -> str:
        text = self._sql.get(sql)
        if text is None:
            text = self._sql[sql] = self.dialect.sql(sql)
        return text

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        cursor = self.connection.cursor()
        try:
            cursor.execute(self._text(sql), tuple(params))
        finally:
            cursor.close()

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = [tuple(row) for row in rows]
        if not rows:
            return
        cursor = self.connection.cursor()
        try:
            cursor.executemany(self._text(sql), rows)
        finally:
            cursor.close()

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = self.connection.cursor()
        try:
            cursor.execute(self._text(sql), tuple(params))
            return [tuple(row) for row in cursor.fetchall()]
        finally:
            cursor.close()

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        rows = self.query(sql, params)
        return rows[0][0] if rows else None

    def commit(self) -> None:
        self.execute("COMMIT")

    def rollback(self) -> None:
        """End a transaction that failed; a connection already gone has nothing to end."""
        with suppress(Exception):  # the connection may be the thing that broke
            self.execute("ROLLBACK")

    @contextmanager
    def reading(self) -> Iterator[Db]:
        """A read transaction (one snapshot), ended however the block ends."""
        self.dialect.begin_read(self)
        try:
            yield self
        finally:
            self.rollback()


def marks(count: int) -> str:
    """``?, ?, ?`` for ``count`` values."""
    return ", ".join("?" * count)


def chunks(items: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
