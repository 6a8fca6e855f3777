"""Store URLs: which backend and file, and what a message may show of them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from relmerge.errors import StoreError
from relmerge.graphstore import open_graph_store, redact_store_url
from relmerge.graphstore.url import sqlite_path, url_secrets


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///graph.db", Path("graph.db")),
        ("sqlite:///data/kg/graph.db", Path("data/kg/graph.db")),
        ("sqlite:////srv/kg/graph.db", Path("/srv/kg/graph.db")),
        ("SQLite:////srv/my graph.db", Path("/srv/my graph.db")),
    ],
)
def test_sqlite_urls_name_a_relative_or_absolute_file(url: str, path: Path) -> None:
    assert sqlite_path(url) == path
    assert open_graph_store(url).url == url


@pytest.mark.parametrize(
    "url",
    ["sqlite://host/graph.db", "sqlite:///", "sqlite:///:memory:", "sqlite:///g.db?mode=ro"],
)
def test_sqlite_urls_that_name_no_file_are_refused(url: str) -> None:
    with pytest.raises(StoreError, match="SQLite store URL"):
        open_graph_store(url)


@pytest.mark.parametrize(
    "url", ["mysql://a@h/db", "graph.db", "/srv/graph.db", "neo4j://h:7687", ""]
)
def test_other_schemes_are_refused_naming_the_supported_ones(url: str) -> None:
    with pytest.raises(StoreError, match="sqlite:///PATH") as error:
        open_graph_store(url)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://ann:s3cr3t@db:5432/kg", "postgresql://ann:***@db:5432/kg"),
        ("postgres://ann:p%40ss@db/kg?sslmode=require", "postgres://ann:***@db/kg?sslmode=require"),
        ("postgresql://ann:p@ss/w@db/kg", "postgresql://ann:***@db/kg"),
        (
            "postgresql:///kg?host=/run/pg&password=s3cr3t&user=a",
            "postgresql:///kg?host=/run/pg&password=***&user=a",
        ),
        ("postgresql://ann@db/kg", "postgresql://ann@db/kg"),
        ("sqlite:////srv/kg/graph.db", "sqlite:////srv/kg/graph.db"),
    ],
)
def test_passwords_are_hidden(url: str, shown: str) -> None:
    assert redact_store_url(url) == shown


def test_the_password_is_known_as_written_and_decoded() -> None:
    assert set(url_secrets("postgresql://ann:p%40ss@db/kg?password=x%2Fy")) == {
        "p%40ss",
        "p@ss",
        "x%2Fy",
        "x/y",
    }


async def test_a_relative_sqlite_url_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "stores").mkdir()  # init creates the file, never its folder
    async with open_graph_store("sqlite:///stores/graph.db") as store:
        assert await store.init() is True
    assert (tmp_path / "stores" / "graph.db").is_file()
    assert os.listdir(tmp_path) == ["stores"]
