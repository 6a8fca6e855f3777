"""A throw-away PostgreSQL server for the relation store tests.

``initdb`` makes a cluster in a temporary folder; ``pg_ctl`` starts it listening only on
a unix socket in that folder (no TCP port to collide with); each test gets a database of
its own. Run as root (CI containers), the server runs as the ``postgres`` system user
(PostgreSQL refuses root), in a folder that user owns. Durability is switched off: the
cluster is deleted at the end, and the tests kill clients, never the server.

Without PostgreSQL on the machine the tests that need it are skipped with the reason,
except under ``CI=true``, where they fail: CI installs it (scripts/test.sh).
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

SUPERUSER = "relmerge"


def find_bin() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl``: on PATH, else Debian's versioned folders
    (the newest)."""
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    return Path(candidates[-1]).parent if candidates else None


def unavailable(reason: str) -> None:
    """Skip, or fail under CI=true (a CI machine must run these tests)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: these tests must run in CI)")
    pytest.skip(reason)


class PostgresServer:
    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="relmerge-pg-"))
        self.data = self.root / "data"
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self._names = itertools.count(1)
        if self._as:
            shutil.chown(self.root, "postgres", "postgres")
        self.root.chmod(0o700)

    def _run(self, *args: str) -> None:
        done = subprocess.run(
            [*self._as, *args], capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {done.stdout}\n{done.stderr}")

    def start(self) -> None:
        self._run(
            str(self.bin_dir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        # A small lock table (16 per connection, the default is 64): a store that took a
        # lock-table entry per pair of a batch would fail here at a few thousand pairs,
        # as it would on a default server at a few tens of thousands.
        options = (
            f"-k {self.root} -c listen_addresses='' -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off -c max_connections=60 -c max_locks_per_transaction=16"
        )
        self._run(
            str(self.bin_dir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.root / "server.log"),
            "-o",
            options,
            "-w",
            "start",
        )

    def url(self, database: str) -> str:
        return f"postgresql://{SUPERUSER}@/{database}?host={self.root}"

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        import psycopg

        name = f"test_{next(self._names)}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def postgres_server() -> Iterator[PostgresServer]:
    """The body of the session fixture (tests/graphstore/conftest.py)."""
    bin_dir = find_bin()
    if bin_dir is None:
        unavailable("PostgreSQL is not installed here (no initdb): apt-get install postgresql")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed: pip install 'relmerge[postgres]'")
    assert bin_dir is not None
    server = PostgresServer(bin_dir)
    try:
        server.start()
        yield server
    finally:
        server.stop()
