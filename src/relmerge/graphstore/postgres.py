"""The PostgreSQL dialect: a relation store on a shared server (extra ``relmerge[postgres]``).

Concurrency: every write transaction runs at READ COMMITTED and first takes its locks,
always in the same order, so that two writers never wait on each other in a cycle: the
store's advisory lock, shared (a load takes it exclusively: it holds the whole store);
advisory locks on its batch id and on stripes of its entity and new relation ids, in
ascending order; then ``FOR UPDATE`` row locks on the version rows of its pairs, in
ascending order. Each statement after the locks
sees what committed before them, so a batch's version check cannot be overtaken before it
commits. Reads run at REPEATABLE READ, READ ONLY: one snapshot per lookup or dump.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit

from relmerge.errors import StoreError, StoreUnavailableError
from relmerge.graphstore.base import Pair, lock_key
from relmerge.graphstore.db import Connection, Db, Locks, chunks
from relmerge.graphstore.schema import Types

try:
    import psycopg
except ImportError:  # pragma: no cover - the message is tested in a subprocess
    raise StoreError(
        "a postgresql:// relation store needs psycopg: pip install 'relmerge[postgres]'"
    ) from None

STORE_KEY = lock_key("store")
CONNECT_TIMEOUT = 10  # seconds, unless the URL says connect_timeout
LOCK_TIMEOUT = "60s"  # a writer waits this long for another's locks, then gives up


class PostgresDialect:
    name = "postgresql"
    types = Types(
        serial="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", integer="BIGINT", blob="BYTEA"
    )
    # ANALYZE samples a fixed number of rows: cheap on any size of table.
    statistics_sql = (
        "ANALYZE relmerge_relations, relmerge_pairs, relmerge_mapping, relmerge_members, "
        "relmerge_member_chunks"
    )
    identity_override = "OVERRIDING SYSTEM VALUE"  # row_seq is GENERATED ALWAYS

    def __init__(self, conninfo: str, url: str, secrets: Sequence[str]) -> None:
        self._conninfo = conninfo
        self.url = url
        self._secrets = [secret for secret in secrets if secret]

    def connect(self, create: bool) -> Connection:
        options: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in parse_qs(urlsplit(self._conninfo).query):
            options["connect_timeout"] = CONNECT_TIMEOUT
        try:
            connection = psycopg.connect(self._conninfo, **options)
            connection.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
        except psycopg.Error as error:
            raise StoreUnavailableError(
                f"cannot connect to the store {self.url}: {self._message(error)}; check that "
                "the server runs and is reachable there (host, port or socket directory), "
                "and the user, password and database name"
            ) from None
        return connection

    def sql(self, text: str) -> str:
        return text.replace("%", "%%").replace("?", "%s")

    def begin_read(self, db: Db) -> None:
        db.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")

    def begin_write(self, db: Db, locks: Locks) -> None:
        db.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
        if locks.exclusive:
            db.execute("SELECT pg_advisory_xact_lock(?)", [STORE_KEY])
        else:
            db.execute("SELECT pg_advisory_xact_lock_shared(?)", [STORE_KEY])
        if locks.keys:
            # unnest keeps the array's (ascending) order: the locks are taken in it.
            db.execute(
                "SELECT pg_advisory_xact_lock(k) FROM unnest(?::bigint[]) AS k", [list(locks.keys)]
            )
        self._lock_pairs(db, locks.pairs)

    def _lock_pairs(self, db: Db, pairs: Sequence[Pair]) -> None:
        """Row locks on the pairs' version rows (made first where missing): unlike advisory
        locks, row locks take no room in the server's lock table, so a batch may hold tens
        of thousands. ``pairs`` come sorted by code point, which is the "C" collation's
        byte order in UTF-8: both statements go through them in the same order."""
        for part in chunks(pairs):
            db.execute(
                "INSERT INTO relmerge_pairs (pair_lo, pair_hi, version, relation_count) VALUES "
                + ", ".join(["(?, ?, 0, 0)"] * len(part))
                + " ON CONFLICT (pair_lo, pair_hi) DO NOTHING",
                [value for pair in part for value in pair],
            )
        for part in chunks(pairs):
            db.query(
                "SELECT p.version FROM relmerge_pairs p JOIN (VALUES "
                + ", ".join(["(?, ?)"] * len(part))
                + ") AS w (lo, hi) ON p.pair_lo = w.lo AND p.pair_hi = w.hi "
                'ORDER BY p.pair_lo COLLATE "C", p.pair_hi COLLATE "C" FOR UPDATE OF p',
                [value for pair in part for value in pair],
            )

    def has_table(self, db: Db, name: str) -> bool:
        return bool(
            db.scalar(
                "SELECT count(*) FROM information_schema.tables "
                "WHERE table_schema = current_schema() AND table_name = ?",
                [name],
            )
        )

    def table_count(self, db: Db) -> int:
        return int(
            db.scalar(
                "SELECT count(*) FROM information_schema.tables "
                "WHERE table_schema = current_schema()"
            )
        )

    def is_broken(self, connection: Connection) -> bool:
        return bool(getattr(connection, "broken", False) or getattr(connection, "closed", False))

    def store_error(self, error: BaseException) -> StoreError | None:
        if isinstance(error, psycopg.errors.LockNotAvailable):
            return StoreUnavailableError(
                f"the store {self.url} stayed locked by another writer for {LOCK_TIMEOUT}; "
                "try again when it is done"
            )
        state = getattr(error, "sqlstate", None)
        if isinstance(error, psycopg.OperationalError) and (
            state is None or state.startswith(("08", "57P"))  # no answer, or the server left
        ):
            return StoreUnavailableError(
                f"lost the connection to the store {self.url}: {self._message(error)}; "
                "nothing of the operation was kept: run it again"
            )
        if isinstance(error, psycopg.Error):
            return StoreError(f"store {self.url}: {self._message(error)}")
        return None

    def _message(self, error: BaseException) -> str:
        """The driver's message on one line, with the password (if it appears) hidden."""
        text = " ".join(str(error).split()) or type(error).__name__
        for secret in sorted(self._secrets, key=len, reverse=True):
            text = text.replace(secret, "***")
        return text
