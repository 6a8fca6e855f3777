"""Store-merge tests on both backends (SQLite file; a real PostgreSQL server)."""

from tests.graphstore.conftest import postgres_server, store_url  # noqa: F401
