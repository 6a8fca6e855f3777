"""The SQLite dialect: a relation store in one file, the embedded default.

WAL journal: readers never wait for the writer, and several processes can share the file
(on one machine: WAL needs shared memory, so not over a network file system). A write
transaction begins with ``BEGIN IMMEDIATE``, which takes the file's one write lock at
once: writers queue there (busy timeout, then a few retries), and a transaction that
has begun never fails half-way for a lock. That one lock is also what makes a batch's
version check and its writes atomic on SQLite.
"""

from __future__ import annotations

import shlex
import sqlite3
import time
from pathlib import Path
from urllib.parse import quote

from relmerge.errors import StoreError, StoreSchemaError, StoreUnavailableError
from relmerge.graphstore.db import Connection, Db, Locks
from relmerge.graphstore.schema import Types

BUSY_SECONDS = 60.0  # how long one attempt waits for another process's write lock
BEGIN_ATTEMPTS = 3


class SqliteDialect:
    name = "sqlite"
    types = Types(serial="INTEGER PRIMARY KEY", integer="INTEGER", blob="BLOB")
    statistics_sql = "PRAGMA optimize"  # analyses only where SQLite finds it useful
    identity_override = ""

    def __init__(self, path: Path, url: str) -> None:
        self.path = path
        self.url = url

    def connect(self, create: bool) -> Connection:
        if not create and not self.path.exists():
            raise StoreSchemaError(
                f"no relmerge store at {self.url} (no such file): create one with "
                f"`relmerge store init {shlex.quote(self.url)}`"
            )
        folder = self.path.parent
        if create and not folder.is_dir():
            # The file is init's to create, not a directory tree a typo in the URL named.
            raise StoreUnavailableError(
                f"cannot create the store {self.url}: the directory {folder} does not exist; "
                f"create it first (mkdir -p {shlex.quote(str(folder))}) or correct the URL"
            )
        try:
            mode = "rwc" if create else "rw"
            connection = sqlite3.connect(
                f"file:{quote(str(self.path))}?mode={mode}",
                uri=True,
                isolation_level=None,  # transactions are begun and ended by the store
                check_same_thread=False,  # made on the caller's thread, used on the worker's
                timeout=BUSY_SECONDS,
            )
        except (sqlite3.Error, OSError) as error:
            raise StoreUnavailableError(
                f"cannot open the store {self.url}: {error}; check the path and its permissions"
            ) from None
        try:
            connection.execute(f"PRAGMA busy_timeout = {int(BUSY_SECONDS * 1000)}")
            connection.execute("PRAGMA journal_mode = WAL")
            # FULL: a batch reported applied survives a power cut too, not only a crash.
            connection.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as error:
            connection.close()
            raise self._error(error) from None
        return connection

    def sql(self, text: str) -> str:
        return text

    def begin_read(self, db: Db) -> None:
        db.execute("BEGIN")  # WAL: the snapshot is taken at the first read and kept

    def begin_write(self, db: Db, locks: Locks) -> None:
        # One write lock for the whole file: whatever ``locks`` names is held with it.
        for attempt in range(1, BEGIN_ATTEMPTS + 1):
            try:
                db.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as error:
                if not _busy(error) or attempt == BEGIN_ATTEMPTS:
                    raise
                time.sleep(0.05 * attempt)

    def has_table(self, db: Db, name: str) -> bool:
        return bool(
            db.scalar(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", [name]
            )
        )

    def table_count(self, db: Db) -> int:
        return int(db.scalar("SELECT count(*) FROM sqlite_master WHERE type = 'table'"))

    def is_broken(self, connection: Connection) -> bool:
        return False

    def store_error(self, error: BaseException) -> StoreError | None:
        if isinstance(error, sqlite3.Error):
            return self._error(error)
        return None

    def _error(self, error: sqlite3.Error) -> StoreError:
        message = " ".join(str(error).split())
        if isinstance(error, sqlite3.DatabaseError) and (
            "not a database" in message or "malformed" in message
        ):
            return StoreSchemaError(
                f"{self.url} is not a relmerge store: the file is not a SQLite database ({message})"
            )
        if _busy(error):
            return StoreUnavailableError(
                f"the store {self.url} stayed locked by another writer for "
                f"{BEGIN_ATTEMPTS} x {BUSY_SECONDS:.0f} s; try again when it is done"
            )
        return StoreError(f"store {self.url}: {message}")


def _busy(error: sqlite3.Error) -> bool:
    text = str(error)
    return "database is locked" in text or "database is busy" in text
