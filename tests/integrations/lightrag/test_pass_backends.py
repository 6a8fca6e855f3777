"""A pass over a real LightRAG on server storages, through LightRAG's own API.

PostgreSQL: LightRAG's ``PGKVStorage``, ``PGDocStatusStorage`` and ``PGTableGraphStorage``
(plain tables) on a throw-away server (tests/support/postgres.py), a database per test.
Redis: ``RedisKVStorage`` and ``RedisDocStatusStorage`` on a throw-away ``redis-server``
(tests/support/redis_server.py), the graph on NetworkX files. Vectors on NanoVectorDB
files in both. The same pass and undo as on the file storages (test_pass_files.py), a
pass over one insert's documents, which must read that insert's edges only, and a pass
that writes the graph alone, whose stale vector must be listed and repairable.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

pytest.importorskip("lightrag")

from lightrag import QueryParam

from relmerge.config import DeduplicateRelationsConfig
from relmerge.integrations.lightrag import deduplicate, undo
from relmerge.integrations.lightrag.edits import reembed_call
from relmerge.integrations.lightrag.graph import _status
from tests.integrations.lightrag.support import Fact, Script, edges, insert, make_rag
from tests.support.postgres import PostgresServer
from tests.support.postgres import postgres_server as _postgres
from tests.support.redis_server import RedisServer
from tests.support.redis_server import redis_server as _redis

BACKENDS = ("postgresql", "redis")
RULES_ONLY = DeduplicateRelationsConfig(semantic_merge=False)
PAIR = ("Alice", "Bob")
FIELDS = ("description", "keywords", "source_id", "file_path")


def _friends(description: str) -> list[Fact]:
    return [Fact("Alice", "Bob", "friendship", description)]


# (document id, text, facts): four mentions of one pair (two wordings of one fact, and
# two facts that differ by a year), and an unrelated pair in the first document.
FRIENDS: list[tuple[str, str, list[Fact]]] = [
    (
        "doc-a",
        "Alice met Bob at school.",
        [*_friends("Alice is a friend of Bob"), Fact("Eve", "Frank", "rivalry", "Eve vs Frank")],
    ),
    ("doc-b", "Alice and Bob play together.", _friends("Alice is a friend of Bob.")),
    ("doc-c", "Alice lent Bob a book.", _friends("Alice lent Bob a book in 1998")),
    ("doc-d", "Bob returned it in 2001.", _friends("Alice lent Bob a book in 2001")),
]
# A later insert: one more wording of the repeated fact, and a pair new to the graph.
LATER = (
    "doc-e",
    "Carol saw Alice and Bob.",
    [
        Fact("Alice", "Bob", "friendship", "Alice is a friend of Bob!"),
        Fact("Carol", "Dave", "family", "Carol is the sister of Dave"),
    ],
)


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[PostgresServer]:
    yield from _postgres()


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    yield from _redis()


@pytest.fixture(params=BACKENDS)
def storages(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, str]]:
    """The LightRAG storage arguments of each backend, its server settings in the
    environment (where LightRAG reads them), on an empty database of its own."""
    monkeypatch.chdir(request.getfixturevalue("tmp_path"))  # no stray config.ini
    if request.param == "postgresql":
        server: PostgresServer = request.getfixturevalue("postgres_server")
        database = urlsplit(server.new_database()).path.lstrip("/")
        for name, value in {
            "POSTGRES_HOST": str(server.root),  # a folder: the server's unix socket
            "POSTGRES_PORT": "5432",
            "POSTGRES_USER": "relmerge",
            "POSTGRES_PASSWORD": "unused",  # trust authentication; LightRAG wants one set
            "POSTGRES_DATABASE": database,
            "POSTGRES_MAX_CONNECTIONS": "8",
        }.items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("POSTGRES_WORKSPACE", raising=False)
        yield {
            "kv_storage": "PGKVStorage",
            "doc_status_storage": "PGDocStatusStorage",
            "graph_storage": "PGTableGraphStorage",
        }
        _drop_postgres_pool()
    else:
        redis: RedisServer = request.getfixturevalue("redis_server")
        monkeypatch.setenv("REDIS_URI", redis.new_database())
        yield {"kv_storage": "RedisKVStorage", "doc_status_storage": "RedisDocStatusStorage"}
        _drop_redis_pools()


def _drop_postgres_pool() -> None:
    """Forget LightRAG's process-wide PostgreSQL pool if a failed test left it held: it
    is bound to that test's event loop, closed now, and the next test must make its own
    (``finalize_storages`` releases it when the test gets there)."""
    from lightrag.kg.postgres_impl import ClientManager

    held = ClientManager._instances
    db = held.get("db")
    held.update({"db": None, "ref_count": 0, "vector_signature": None})
    if db is not None and db.pool is not None:
        with contextlib.suppress(RuntimeError):  # "Event loop is closed": gone with it
            db.pool.terminate()


def _drop_redis_pools() -> None:
    """Forget LightRAG's process-wide Redis pools a failed test left held (the sockets
    belong to that test's closed event loop)."""
    from lightrag.kg.redis_impl import RedisConnectionManager

    with RedisConnectionManager._lock:
        RedisConnectionManager._pools.clear()
        RedisConnectionManager._pool_refs.clear()


def script() -> Script:
    found = Script()
    for _, text, facts in [*FRIENDS, LATER]:
        found.facts[text] = facts
    return found


async def _built(folder: Path, given: Script, storages: dict[str, str]) -> Any:
    rag = make_rag(folder, given, **storages)
    await rag.initialize_storages()
    for doc_id, text, _ in FRIENDS:
        await insert(rag, {doc_id: text})
    return rag


async def _descriptions(rag: Any, mode: str) -> list[str]:
    """The relation descriptions a query of ``mode`` hands to the model."""
    data = await rag.aquery_data("Alice Bob friendship", QueryParam(mode=mode))
    return [
        row["description"]
        for row in data["data"]["relationships"]
        if {row["src_id"], row["tgt_id"]} == set(PAIR)
    ]


async def _vector(rag: Any) -> dict[str, Any]:
    """The relationship vector row of Alice-Bob (LightRAG ids it by either order)."""
    from lightrag.utils import compute_mdhash_id

    ids = [compute_mdhash_id(a + b, prefix="rel-") for a, b in (PAIR, PAIR[::-1])]
    rows = [row for row in await rag.relationships_vdb.get_by_ids(ids) if row]
    assert len(rows) == 1
    return dict(rows[0])


def _assert_same_edge(now: dict[str, Any], then: dict[str, Any]) -> None:
    for name in FIELDS:
        assert now[name] == then[name], name
    assert float(now["weight"]) == float(then["weight"])


def test_a_pass_merges_repeats_keeps_facts_and_undo_restores(
    tmp_path: Path, storages: dict[str, str]
) -> None:
    async def scenario() -> None:
        given = script()
        rag = await _built(tmp_path / "rag", given, storages)
        try:
            before = await edges(rag)
            edge = before[PAIR]
            assert edge["description"].count("<SEP>") == 3
            given.embedded.clear()
            done = await deduplicate(rag, output=tmp_path / "out", config=RULES_ONLY)
            graph = await edges(rag)
            after = graph[PAIR]
            parts = after["description"].split("<SEP>")
            # the two wordings of one fact are one fragment; 1998 and 2001 stay apart
            assert len(parts) == 3
            assert sum("1998" in p for p in parts) == 1 and sum("2001" in p for p in parts) == 1
            assert after["source_id"] == edge["source_id"]
            assert float(after["weight"]) == float(edge["weight"])
            assert graph[("Eve", "Frank")] == before[("Eve", "Frank")]  # one fragment: kept
            assert done.edges_read == 2 and done.edges_changed == 1
            assert done.fragments_before == 5 and done.fragments_after == 4
            assert done.stale_edges == []
            assert any("Alice\tBob" in text for text in given.embedded)  # re-embedded
            assert await _descriptions(rag, "local") == [after["description"]]
            assert await _descriptions(rag, "global") == [after["description"]]
            taken = await undo(rag, tmp_path / "out")
            assert taken.restored == 1 and taken.rebased == 0 and taken.gone_edges == []
            _assert_same_edge((await edges(rag))[PAIR], edge)
            assert await _descriptions(rag, "global") == [edge["description"]]
        finally:
            await rag.finalize_storages()

    asyncio.run(scenario())


def test_a_pass_over_one_insert_reads_only_its_edges(
    tmp_path: Path, storages: dict[str, str]
) -> None:
    async def scenario() -> None:
        given = script()
        rag = await _built(tmp_path / "rag", given, storages)
        try:
            doc_id, text, facts = LATER
            track_id = await insert(rag, {doc_id: text})
            before = await edges(rag)
            assert len(before) == 3  # Alice-Bob, Eve-Frank, Carol-Dave
            # the backend's doc status, as the pass reads it (a string from PostgreSQL,
            # an enum from the others)
            (row,) = await rag.doc_status.get_by_ids([doc_id])
            assert _status(row) == "processed"
            by_track = await deduplicate(
                rag, output=tmp_path / "by-track", track_id=track_id, config=RULES_ONLY
            )
            assert by_track.documents == [doc_id]
            assert by_track.waiting_documents == [] and by_track.unknown_documents == []
            # the pairs the document contributed, not the graph's three edges
            assert by_track.edges_read == len(facts) == 2
            assert by_track.edges_changed == 1  # Alice-Bob: three wordings of one fact
            assert by_track.fragments_before == 6 and by_track.fragments_after == 4
            after = await edges(rag)
            assert after[("Carol", "Dave")] == before[("Carol", "Dave")]
            assert after[("Eve", "Frank")] == before[("Eve", "Frank")]
            assert after[PAIR]["source_id"] == before[PAIR]["source_id"]
            # a pass by document ids reads the same edges; nothing is left to merge
            by_ids = await deduplicate(
                rag, output=tmp_path / "by-ids", documents=[doc_id], config=RULES_ONLY
            )
            assert by_ids.documents == [doc_id] and by_ids.edges_read == 2
            assert by_ids.edges_changed == 0
            taken = await undo(rag, tmp_path / "by-track")
            assert taken.restored == 1
            _assert_same_edge((await edges(rag))[PAIR], before[PAIR])
        finally:
            await rag.finalize_storages()

    asyncio.run(scenario())


def test_a_pass_without_reembedding_lists_the_stale_vector_and_its_repair(
    tmp_path: Path, storages: dict[str, str]
) -> None:
    async def scenario() -> None:
        given = script()
        rag = await _built(tmp_path / "rag", given, storages)
        try:
            edge = (await edges(rag))[PAIR]
            assert "Alice is a friend of Bob." in (await _vector(rag))["content"]
            given.embedded.clear()
            done = await deduplicate(rag, output=tmp_path / "out", config=RULES_ONLY, reembed=False)
            assert done.edges_changed == 1 and done.stale_edges == [PAIR]
            assert given.embedded == []
            merged = (await edges(rag))[PAIR]["description"]
            assert merged.count("<SEP>") == 2
            # the graph alone was written: the vector still holds the old wording
            assert "Alice is a friend of Bob." in (await _vector(rag))["content"]
            # the repair the pass hands out (reembed_call) re-embeds it as it is now
            assert "aedit_relation(source, target, {})" in reembed_call("stale.json")
            for source, target in done.stale_edges:
                await rag.aedit_relation(source, target, {})
            content = (await _vector(rag))["content"]
            assert merged in content and "Alice is a friend of Bob." not in content
            assert (await edges(rag))[PAIR]["description"] == merged
            taken = await undo(rag, tmp_path / "out", reembed=False)
            assert taken.restored == 1 and taken.stale_edges == [PAIR]
            _assert_same_edge((await edges(rag))[PAIR], edge)
        finally:
            await rag.finalize_storages()

    asyncio.run(scenario())
