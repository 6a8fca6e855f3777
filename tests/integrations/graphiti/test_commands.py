"""``relmerge graphiti dedupe`` and ``undo`` run as a user runs them (a separate process),
on a Graphiti graph built with graphiti-core's own API: an embedded Kuzu database
(``kuzu:///path``) and a FalkorDB server (``falkordb://host:port``). The judge is the gold
judge served as an OpenAI-compatible chat endpoint; the graph's embeddings, when given,
an OpenAI-compatible embeddings endpoint served here."""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest


def _require(module: str, install: str) -> None:
    try:
        __import__(module)
    except ImportError:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"{module} is not installed: pip install {install}", allow_module_level=True)


_require("graphiti_core", "'graphiti-core==0.31.2'")
_require("kuzu", "'kuzu>=0.11'")

from graphiti_core.driver.driver import GraphDriver  # noqa: E402
from graphiti_core.edges import EntityEdge  # noqa: E402
from graphiti_core.nodes import EpisodicNode  # noqa: E402

from relmerge.eval.gold_judge import GoldJudge  # noqa: E402
from relmerge.review.rerun import command_outline, made_by, recorded_command  # noqa: E402
from tests.integrations.graphiti.support import (  # noqa: E402
    BACKENDS,
    Backend,
    BuiltGraph,
    HashingEmbedder,
    build_graph,
    open_graph,
)
from tests.support.cli_process import error_line, relmerge  # noqa: E402
from tests.support.falkordb_server import FalkorDBServer, falkordb_server_fixture  # noqa: E402
from tests.support.gold_judge import gold_task_handler  # noqa: E402
from tests.support.llm_server import LLMServer  # noqa: E402

WORKS = "Alice works at Acme"
EMPLOYED = "Alice is employed by Acme"
FOUNDED = "Alice founded Acme in 2010"
KNOWS = "Bob knows Dan"
KNOWS_AGAIN = "Bob knows Dan."
LABELLED: list[tuple[str, tuple[Any, ...]]] = [
    ("work", ("Alice", "Acme", "WORKS_AT", WORKS, None, None, ["ep1"])),
    ("work", ("Alice", "Acme", "EMPLOYED_BY", EMPLOYED, None, None, ["ep2"])),
    ("founded", ("Alice", "Acme", "FOUNDED", FOUNDED, None, None, ["ep1"])),
    ("knows", ("Bob", "Dan", "KNOWS", KNOWS, None, None, ["ep2"])),
    ("knows", ("Bob", "Dan", "KNOWS", KNOWS_AGAIN, None, None, ["ep3"])),
]
_names = itertools.count(1)


@pytest.fixture(scope="module")
def falkordb() -> Iterator[FalkorDBServer]:
    yield from falkordb_server_fixture()


@dataclass
class Graph:
    """A graph built here, closed again: its URL for the command, how to reopen it."""

    kind: Backend
    url: str
    group: str
    built: BuiltGraph
    tmp_path: Path
    port: int | None

    def uuid(self, fact: str) -> str:
        return next(edge.uuid for edge in self.built.edges if edge.fact == fact)

    def judge(self) -> GoldJudge:
        names = {node.uuid: node.name for node in self.built.nodes.values()}
        gold = {
            edge.uuid: label for edge, (label, _) in zip(self.built.edges, LABELLED, strict=True)
        }
        records = [
            {
                "relation_id": edge.uuid,
                "description": edge.fact,
                "name": edge.name,
                "source_entity_name": names[edge.source_node_uuid],
                "target_entity_name": names[edge.target_node_uuid],
            }
            for edge in self.built.edges
        ]
        return GoldJudge(gold, records=records)

    async def _open(self) -> GraphDriver:
        if self.kind == "falkordb":
            return await open_graph(self.kind, self.tmp_path, group_id=self.group, port=self.port)
        import warnings

        from graphiti_core.driver.kuzu_driver import KuzuDriver

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # "Kuzu backend is deprecated"
            return KuzuDriver(db=str(self.tmp_path / f"{self.group}.kuzu"))

    def read(self) -> tuple[dict[str, EntityEdge], dict[str, list[str]]]:
        """The group's edges (with vectors) and each episode's edge list, as now stored."""

        async def read() -> tuple[dict[str, EntityEdge], dict[str, list[str]]]:
            driver = await self._open()
            try:
                found = await EntityEdge.get_by_group_ids(
                    driver, [self.group], with_embeddings=True
                )
                uuids = [episode.uuid for episode in self.built.episodes.values()]
                episodes = await EpisodicNode.get_by_uuids(driver, uuids)
            finally:
                await _close(driver)
            lists = {episode.uuid: list(episode.entity_edges) for episode in episodes}
            return {edge.uuid: edge for edge in found}, lists

        return asyncio.run(read())


async def _close(driver: GraphDriver) -> None:
    """Close the driver; Kuzu's only on collection, so that the command can open the file."""
    await driver.close()
    client, db = getattr(driver, "client", None), getattr(driver, "db", None)
    for handle in (client, db):
        closing = getattr(handle, "close", None) if driver.provider.value == "kuzu" else None
        if closing is not None:
            closing()
    gc.collect()


@pytest.fixture(params=BACKENDS)
def graph(request: pytest.FixtureRequest, tmp_path: Path) -> Graph:
    kind: Backend = request.param
    group = f"relmerge_cli{next(_names)}"
    port = request.getfixturevalue("falkordb").port if kind == "falkordb" else None

    async def build() -> BuiltGraph:
        driver = await open_graph(kind, tmp_path, group_id=group, port=port)
        try:
            return await build_graph(driver, group, [row for _, row in LABELLED])
        finally:
            await _close(driver)

    built = asyncio.run(build())
    url = (
        f"falkordb://127.0.0.1:{port}" if kind == "falkordb" else f"kuzu://{tmp_path}/{group}.kuzu"
    )
    return Graph(kind, url, group, built, tmp_path, port)


@pytest.fixture
def judge_server(graph: Graph, monkeypatch: pytest.MonkeyPatch) -> Iterator[LLMServer]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-judge")
    with LLMServer(handler=gold_task_handler(graph.judge())) as server:
        yield server


def _judged(server: LLMServer) -> list[str]:
    return ["--llm-base-url", server.base_url, "--llm-model", "judge"]


def test_without_an_embedder_survivors_are_rewritten_listed_stale_and_undo_restores(
    graph: Graph, judge_server: LLMServer, tmp_path: Path
) -> None:
    before, lists_before = graph.read()
    works, employed = graph.uuid(WORKS), graph.uuid(EMPLOYED)
    knows, again = graph.uuid(KNOWS), graph.uuid(KNOWS_AGAIN)
    out = tmp_path / "out"

    done = relmerge(
        "graphiti", "dedupe", graph.url, "--group-id", graph.group, "--output", out,
        *_judged(judge_server),
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert (
        "edges read: 5" in done.stdout
        and "edges merged into a survivor (deleted): 2" in done.stdout
    )
    edges, lists = graph.read()
    assert set(edges) == {works, graph.uuid(FOUNDED), knows}
    assert WORKS in edges[works].fact and EMPLOYED in edges[works].fact
    assert edges[works].episodes == ordered(before[works].episodes + before[employed].episodes)
    assert edges[works].fact_embedding == pytest.approx(before[works].fact_embedding, abs=1e-6)
    assert not {employed, again} & {uuid for listed in lists.values() for uuid in listed}
    # the survivor's vector still embeds its old fact: listed, with the call
    stale = out / "graphiti" / "stale.json"
    assert json.loads(stale.read_text())["edges"] == [works]
    assert str(stale.resolve()) in done.stderr and "generate_embedding(embedder)" in done.stderr
    # `relmerge review OUT` knows the command that made OUT, to run it again
    assert made_by(out) == "graphiti"
    assert command_outline(out).startswith("relmerge graphiti dedupe URL --output ")
    command = recorded_command(out)
    assert command is not None and command.argv[:3] == ["graphiti", "dedupe", graph.url]

    taken = relmerge("graphiti", "undo", graph.url, out)

    assert taken.returncode == 0, taken.stderr
    assert "1 pass taken back" in taken.stdout and "edges restored: 4" in taken.stdout
    restored, lists_after = graph.read()
    assert set(restored) == set(before)
    for uuid, edge in before.items():
        assert restored[uuid].fact == edge.fact
        assert restored[uuid].episodes == edge.episodes
        assert restored[uuid].fact_embedding == pytest.approx(edge.fact_embedding, abs=1e-6)
    assert lists_after == lists_before
    assert not stale.exists()


def ordered(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


class _Embeddings(BaseHTTPRequestHandler):
    """An OpenAI-compatible ``/v1/embeddings`` giving ``HashingEmbedder``'s vectors; each
    request's key, model and texts kept on the server."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server: Any = self.server
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        server.seen.append((self.headers.get("Authorization"), body["model"], texts))
        embedder = HashingEmbedder()
        data = [
            {"object": "embedding", "index": i, "embedding": embedder.embed(text)}
            for i, text in enumerate(texts)
        ]
        answer = json.dumps(
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        """Quiet."""


@pytest.mark.parametrize("graph", ["kuzu"], indirect=True)
def test_an_openai_compatible_embedding_endpoint_re_embeds_and_its_key_is_never_shown(
    graph: Graph, judge_server: LLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    secret = "sk-graph-never-shown"
    monkeypatch.setenv("RELMERGE_TEST_GRAPH_KEY", secret)
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _Embeddings)
    server.seen = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        done = relmerge(
            "graphiti", "dedupe", graph.url, "-g", graph.group, "-o", out,
            "--graph-embedding-base-url", f"http://127.0.0.1:{server.server_port}/v1",
            "--graph-embedding-model", "test-embed",
            "--graph-embedding-api-key-env", "RELMERGE_TEST_GRAPH_KEY",
            *_judged(judge_server),
        )  # fmt: skip
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr
    assert not (out / "graphiti" / "stale.json").exists() and "stale" not in done.stderr
    assert {(key, model) for key, model, _ in server.seen} == {(f"Bearer {secret}", "test-embed")}
    edges, _ = graph.read()
    survivor = edges[graph.uuid(WORKS)]
    assert EMPLOYED in survivor.fact
    assert survivor.fact_embedding == pytest.approx(
        HashingEmbedder().embed(survivor.fact.replace("\n", " ")), abs=1e-6
    )
    assert secret not in done.stdout + done.stderr
    assert not [p for p in out.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_an_unknown_scheme_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = relmerge(
        "graphiti", "dedupe", "memgraph://user:pw@host:7687", "-g", "g", "-o", tmp_path / "out"
    )
    line = error_line(done, "memgraph://***@host:7687", "falkordb://", "kuzu://")
    assert "pw" not in line
    assert not (tmp_path / "out").exists()


def test_a_graph_that_is_not_there_is_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.kuzu"
    error_line(
        relmerge("graphiti", "dedupe", f"kuzu://{missing}", "-g", "g", "-o", tmp_path / "out"),
        str(missing),
    )
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"falkordb://someone:hunter22@127.0.0.1:{port}"
    line = error_line(relmerge("graphiti", "undo", url, tmp_path), "no Graphiti pass to undo")
    assert "hunter22" not in line
    (tmp_path / "out2").mkdir()
    line = error_line(
        relmerge("graphiti", "dedupe", url, "-g", "g", "-o", tmp_path / "out2"),
        "does not answer",
    )
    assert "hunter22" not in line and "***@127.0.0.1" in line
