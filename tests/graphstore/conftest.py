"""Every relation store test body runs on both backends: a SQLite file in the test's
temporary folder, and a database of its own on a real PostgreSQL server started for the
session (tests/support/postgres.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.postgres import PostgresServer
from tests.support.postgres import postgres_server as _server

BACKENDS = ("sqlite", "postgresql")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    yield from _server()


def sqlite_url(folder: Path) -> str:
    return f"sqlite:///{folder / 'graph.db'}"  # four slashes: an absolute path


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty, not yet initialised store of each backend."""
    if request.param == "sqlite":
        return sqlite_url(tmp_path)
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.new_database()
