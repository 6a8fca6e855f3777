"""A persistent cache of LLM answers and embedding vectors, in one SQLite file.

Why SQLite: every answer is committed the moment it arrives (WAL journal), so a run killed
at any point keeps all the LLM work it had finished; a second run, or several processes
sharing ``--cache PATH``, read it back without re-asking. Keys are sha256 digests of
everything that determines the value (see :func:`answer_key`, :func:`vector_key`), so a
changed prompt, schema, model or temperature is a miss, never a wrong answer.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from relmerge.errors import StoreError

CACHE_FILE = ".relmerge/cache.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS llm_answers (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    model TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS embeddings (
    key BLOB PRIMARY KEY,
    vector BLOB NOT NULL
);
"""
_LOOKUP_CHUNK = 500  # SQLite's default limit on host parameters is 999 in old builds


@dataclass(frozen=True)
class CachedAnswer:
    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int


def answer_key(identity: Mapping[str, Any], request: Mapping[str, Any]) -> str:
    """The digest of a model identity (provider, endpoint, model, response format) and a
    request (task, messages, schema, temperature)."""
    payload = orjson.dumps([identity, request], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(payload).hexdigest()


def vector_key(namespace: str, text: str) -> bytes:
    """The digest of an embedder identity and one text (16 bytes keep the index small)."""
    return hashlib.sha256(f"{namespace}\x00{text}".encode()).digest()[:16]


class RunCache:
    """LLM answers and embeddings kept in the SQLite file at ``path`` (created if missing).

    >>> import tempfile, pathlib
    >>> cache = RunCache(pathlib.Path(tempfile.mkdtemp()) / "cache.sqlite")
    >>> cache.put_answer("k", CachedAnswer("{}", "m", 1, 2)); cache.answer("k").model
    'm'
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None

    @property
    def _db(self) -> sqlite3.Connection:
        """The connection, opened on first use: a run that fails on bad input creates
        nothing."""
        if self._connection is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # Autocommit: each answer is durable on its own; a kill loses nothing finished.
                db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
                db.execute("PRAGMA busy_timeout = 30000")
                db.execute("PRAGMA journal_mode = WAL")
                db.execute("PRAGMA synchronous = NORMAL")
                db.executescript(_SCHEMA)
            except (sqlite3.Error, OSError) as error:
                raise StoreError(
                    f"cannot open the cache {self.path}: {error}; "
                    "delete it or choose another --cache"
                ) from None
            self._connection = db
        return self._connection

    def answer(self, key: str) -> CachedAnswer | None:
        with self._lock:
            row = self._execute(
                "SELECT text, model, prompt_tokens, completion_tokens FROM llm_answers "
                "WHERE key = ?",
                (key,),
            ).fetchone()
        return CachedAnswer(*row) if row else None

    def put_answer(self, key: str, answer: CachedAnswer) -> None:
        with self._lock:
            self._execute(
                "INSERT OR REPLACE INTO llm_answers VALUES (?, ?, ?, ?, ?)",
                (key, answer.text, answer.model, answer.prompt_tokens, answer.completion_tokens),
            )

    def vectors(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """The stored vectors (raw float32 bytes) of those ``keys`` that are present."""
        found: dict[bytes, bytes] = {}
        with self._lock:
            for start in range(0, len(keys), _LOOKUP_CHUNK):
                chunk = keys[start : start + _LOOKUP_CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = self._execute(
                    f"SELECT key, vector FROM embeddings WHERE key IN ({marks})", chunk
                )
                found.update(rows.fetchall())
        return found

    def put_vectors(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        """Store vectors in one transaction."""
        with self._lock:
            try:
                self._db.execute("BEGIN")
                self._db.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?)", items)
                self._db.execute("COMMIT")
            except sqlite3.Error as error:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise StoreError(f"cannot write the cache {self.path}: {error}") from None

    def counts(self) -> dict[str, int]:
        with self._lock:
            answers = self._execute("SELECT count(*) FROM llm_answers").fetchone()[0]
            vectors = self._execute("SELECT count(*) FROM embeddings").fetchone()[0]
        return {"llm_answers": int(answers), "embeddings": int(vectors)}

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _execute(self, sql: str, parameters: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self._db.execute(sql, parameters)
        except sqlite3.Error as error:
            raise StoreError(f"cache {self.path}: {error}") from None
