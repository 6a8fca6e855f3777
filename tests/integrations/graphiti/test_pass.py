"""The Graphiti pass on real graph databases (a FalkorDB server, embedded Kuzu): merges,
the Graphiti way of applying them, validity kept apart, search after, resume, undo.

Each graph is built with graphiti-core's own API (``support.build_graph``) and read back
with graphiti-core's own classes; the judge answers from gold labels (``GoldJudge``)."""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
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
from graphiti_core.graphiti import Graphiti  # noqa: E402
from graphiti_core.nodes import EpisodicNode  # noqa: E402
from graphiti_core.utils.datetime_utils import ensure_utc  # noqa: E402

from relmerge.eval.gold_judge import GoldJudge  # noqa: E402
from relmerge.integrations.graphiti import GraphitiPass, deduplicate, journal, passes, undo  # noqa: E402
from relmerge.integrations.graphiti.graph import own_attributes  # noqa: E402
from tests.integrations.graphiti.support import (  # noqa: E402
    BACKENDS,
    Backend,
    BuiltGraph,
    HashingEmbedder,
    OverlapCrossEncoder,
    ScriptedLLMClient,
    build_graph,
    open_graph,
)
from tests.support.falkordb_server import FalkorDBServer, falkordb_server_fixture  # noqa: E402

ENDED = datetime(2023, 1, 1, tzinfo=UTC)
WORKS = "Alice works at Acme"
EMPLOYED = "Alice is employed by Acme"
FOUNDED = "Alice founded Acme in 2010"
MARRIED = "Bob is married to Carol"
COUPLE = "Carol and Bob are a married couple"
KNOWS = "Bob knows Dan"
KNOWS_AGAIN = "Bob knows Dan."

# (label, fact row): the label is the gold cluster. The invalidated WORKS (ended in 2023)
# is labelled as the same fact as the valid one: the pass must still keep it apart.
LABELLED: list[tuple[str, tuple[Any, ...]]] = [
    ("work", ("Alice", "Acme", "WORKS_AT", WORKS, None, None, ["ep1"])),
    ("work", ("Alice", "Acme", "EMPLOYED_BY", EMPLOYED, None, None, ["ep2"])),
    ("founded", ("Alice", "Acme", "FOUNDED", FOUNDED, None, None, ["ep1"])),
    ("work", ("Alice", "Acme", "WORKS_AT", WORKS, None, ENDED, ["ep4"])),
    ("married", ("Bob", "Carol", "MARRIED_TO", MARRIED, None, None, ["ep1"])),
    ("married", ("Carol", "Bob", "MARRIED_TO", COUPLE, None, None, ["ep2", "ep3"])),
    ("knows", ("Bob", "Dan", "KNOWS", KNOWS, None, None, ["ep3"])),
    ("knows", ("Bob", "Dan", "KNOWS", KNOWS_AGAIN, None, None, ["ep4"])),
]

_names = itertools.count(1)


@pytest.fixture(scope="module")
def falkordb() -> Iterator[FalkorDBServer]:
    yield from falkordb_server_fixture()


@dataclass
class Graph:
    kind: Backend
    driver: GraphDriver
    built: BuiltGraph

    @property
    def group(self) -> str:
        return self.built.group_id

    def uuid(self, fact: str, *, invalid: bool = False) -> str:
        return next(
            e.uuid
            for e in self.built.edges
            if e.fact == fact and (e.invalid_at is not None) == invalid
        )

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


@pytest.fixture(params=BACKENDS)
async def graph(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Graph]:
    kind: Backend = request.param
    group = f"relmerge_pass{next(_names)}"
    port = request.getfixturevalue("falkordb").port if kind == "falkordb" else None
    driver = await open_graph(kind, tmp_path, group_id=group, port=port)
    try:
        built = await build_graph(driver, group, [row for _, row in LABELLED])
        yield Graph(kind, driver, built)
    finally:
        await driver.close()


async def _edges(driver: GraphDriver, group: str) -> dict[str, EntityEdge]:
    found = await EntityEdge.get_by_group_ids(driver, [group], with_embeddings=True)
    return {edge.uuid: edge for edge in found}


async def _episode_lists(graph: Graph) -> dict[str, list[str]]:
    uuids = [episode.uuid for episode in graph.built.episodes.values()]
    return {
        ep.uuid: list(ep.entity_edges)
        for ep in await EpisodicNode.get_by_uuids(graph.driver, uuids)
    }


def _state(edge: EntityEdge) -> dict[str, Any]:
    """What undo must give back, dates compared in UTC (Kuzu reads them naive)."""
    return {
        "fact": edge.fact,
        "name": edge.name,
        "ends": (edge.source_node_uuid, edge.target_node_uuid),
        "episodes": list(edge.episodes),
        "dates": [
            ensure_utc(getattr(edge, n))
            for n in ("created_at", "valid_at", "invalid_at", "expired_at")
        ],
        "attributes": own_attributes(edge),  # FalkorDB's save adds endpoint copies
    }


async def _snapshot(
    graph: Graph,
) -> tuple[dict[str, Any], dict[str, list[float]], dict[str, list[str]]]:
    edges = await _edges(graph.driver, graph.group)
    vectors = {uuid: list(edge.fact_embedding or []) for uuid, edge in edges.items()}
    return {u: _state(e) for u, e in edges.items()}, vectors, await _episode_lists(graph)


async def _assert_restored(graph: Graph, before: Any) -> None:
    states, vectors, episodes = await _snapshot(graph)
    assert states == before[0]
    assert vectors.keys() == before[1].keys()
    for uuid, vector in vectors.items():
        assert vector == pytest.approx(before[1][uuid], abs=1e-6)
    assert episodes == before[2]


async def _search(graph: Graph, query: str) -> set[str]:
    graphiti = Graphiti(
        graph_driver=graph.driver,
        embedder=HashingEmbedder(),
        llm_client=ScriptedLLMClient(),  # search asks no model: any call fails
        cross_encoder=OverlapCrossEncoder(),
    )
    return {edge.uuid for edge in await graphiti.search(query, group_ids=[graph.group])}


async def test_a_judged_pass_merges_the_graphiti_way_and_undo_restores(
    graph: Graph, tmp_path: Path
) -> None:
    before = await _snapshot(graph)
    works, employed = graph.uuid(WORKS), graph.uuid(EMPLOYED)
    ended, founded = graph.uuid(WORKS, invalid=True), graph.uuid(FOUNDED)
    married, couple = graph.uuid(MARRIED), graph.uuid(COUPLE)
    knows, again = graph.uuid(KNOWS), graph.uuid(KNOWS_AGAIN)
    judge = graph.judge()
    embedder = HashingEmbedder()
    out = tmp_path / "out"

    done = await deduplicate(
        graph.driver, group_id=graph.group, output=out, llm=judge, embedder=embedder
    )

    assert judge.calls >= 1
    assert done.edges_read == 8 and done.edges_expired == 0
    assert done.absorbed == {employed: works, couple: married, again: knows}
    assert sorted(done.survivors) == sorted([works, married, knows])
    # the judge put the invalidated WORKS with the valid one: split, and recorded
    assert len(done.splits) == 1 and set(done.splits[0]) == {works, employed, ended}
    edges = await _edges(graph.driver, graph.group)
    assert set(edges) == {works, ended, founded, married, knows}  # absorbed ones deleted
    ep = {name: episode.uuid for name, episode in graph.built.episodes.items()}
    # survivors keep their uuids; their facts every wording; their episodes the union
    assert WORKS in edges[works].fact and EMPLOYED in edges[works].fact
    assert edges[works].episodes == [ep["ep1"], ep["ep2"]]
    assert MARRIED in edges[married].fact and COUPLE in edges[married].fact
    assert edges[married].episodes == [ep["ep1"], ep["ep2"], ep["ep3"]]
    assert edges[knows].episodes == [ep["ep3"], ep["ep4"]]
    # re-embedded with the graph's embedder
    assert edges[works].fact_embedding == pytest.approx(
        embedder.embed(edges[works].fact.replace("\n", " ")), abs=1e-6
    )
    # the invalidated edge and the other fact are untouched
    for uuid in (ended, founded):
        assert _state(edges[uuid]) == before[0][uuid]
        assert edges[uuid].fact_embedding == pytest.approx(before[1][uuid], abs=1e-6)
    # episodes name the survivor instead of the absorbed edge
    lists = await _episode_lists(graph)
    assert lists[ep["ep2"]] == [works, married]
    assert lists[ep["ep3"]] == [married, knows]
    assert lists[ep["ep4"]] == [ended, knows]
    absorbed = set(done.absorbed)
    assert not absorbed & {uuid for listed in lists.values() for uuid in listed}
    # graphiti's own search finds the survivors, never an absorbed edge
    for query, survivor in ((EMPLOYED, works), (COUPLE, married), (KNOWS, knows)):
        found = await _search(graph, query)
        assert survivor in found and not found & absorbed
    assert not (out / "graphiti" / passes.STALE_FILE).exists()
    assert (out / "relation_id_mapping.json").is_file()  # OUT is a run, as `run` writes it

    taken = await undo(graph.driver, out)
    assert taken.passes == 1 and taken.edges_restored == 6 and taken.episodes_restored == 3
    await _assert_restored(graph, before)
    found = await _search(graph, EMPLOYED)
    assert employed in found


async def test_a_rules_only_pass_expires_keeps_vectors_stale_and_undo_restores(
    graph: Graph, tmp_path: Path
) -> None:
    before = await _snapshot(graph)
    knows, again = graph.uuid(KNOWS), graph.uuid(KNOWS_AGAIN)
    out = tmp_path / "out"

    done = await deduplicate(graph.driver, group_id=graph.group, output=out, expire=True)

    # rules alone merge the repeat; the identical invalidated WORKS is kept apart
    assert done.absorbed == {again: knows}
    assert [set(split) for split in done.splits] == [
        {graph.uuid(WORKS), graph.uuid(WORKS, invalid=True)}
    ]
    edges = await _edges(graph.driver, graph.group)
    assert len(edges) == 8 and edges[again].expired_at is not None
    assert edges[again].fact_embedding == pytest.approx(before[1][again], abs=1e-6)
    # the two wordings normalise alike: the survivor's fact and vector stay, nothing stale
    assert edges[knows].fact == KNOWS and edges[knows].episodes == [
        graph.built.episodes["ep3"].uuid,
        graph.built.episodes["ep4"].uuid,
    ]
    assert edges[knows].fact_embedding == pytest.approx(before[1][knows], abs=1e-6)
    stale_file = out / "graphiti" / passes.STALE_FILE
    assert not stale_file.exists()
    found = await _search(graph, KNOWS)
    assert knows in found

    # a second pass does not read the expired edge again; on FalkorDB it finds the group's
    # graph from a driver opened on another graph
    other = graph.driver.clone(database=f"{graph.group}_other")
    if other is not graph.driver:
        await getattr(other, "_init_task")  # noqa: B009
    second = await deduplicate(other, group_id=graph.group, output=out, expire=True)
    assert second.edges_expired == 1 and second.absorbed == {}

    taken = await undo(graph.driver, out)
    assert taken.passes == 2
    await _assert_restored(graph, before)
    assert not stale_file.exists()


async def test_a_pass_killed_while_writing_is_finished_by_calling_it_again(
    graph: Graph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = await _snapshot(graph)
    out = tmp_path / "out"
    real = passes.GraphWriter.write
    calls = 0

    async def dies_after_one(self: passes.GraphWriter, *args: Any) -> bool:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise KeyboardInterrupt
        return await real(self, *args)

    monkeypatch.setattr(passes, "BATCH", 1)
    monkeypatch.setattr(passes.GraphWriter, "write", dies_after_one)
    with pytest.raises(KeyboardInterrupt):
        await deduplicate(graph.driver, group_id=graph.group, output=out, llm=graph.judge())
    kept = journal.current(out)
    assert kept is not None and kept.state == journal.APPLYING and kept.done() == {0}
    monkeypatch.setattr(passes.GraphWriter, "write", real)

    resumed: GraphitiPass = await deduplicate(
        graph.driver, group_id=graph.group, output=out, llm=graph.judge()
    )
    assert resumed.resumed and len(resumed.absorbed) == 3
    assert journal.current(out).state == journal.APPLIED  # type: ignore[union-attr]
    edges = await _edges(graph.driver, graph.group)
    assert not set(resumed.absorbed) & set(edges)
    lists = await _episode_lists(graph)
    assert not set(resumed.absorbed) & {uuid for listed in lists.values() for uuid in listed}

    # no embedder: survivors whose fact changed keep their old vector and are listed
    stale = orjson.loads((out / "graphiti" / passes.STALE_FILE).read_bytes())
    works, married = graph.uuid(WORKS), graph.uuid(MARRIED)
    assert sorted(stale["edges"]) == sorted([works, married])
    assert "generate_embedding(embedder)" in stale["call"] and stale["group_id"] == graph.group
    assert EMPLOYED in edges[works].fact
    assert edges[works].fact_embedding == pytest.approx(before[1][works], abs=1e-6)

    await undo(graph.driver, out)
    await _assert_restored(graph, before)
    assert not (out / "graphiti" / passes.STALE_FILE).exists()


def test_validity_parts_keep_invalidated_edges_apart() -> None:
    def edge(fact: str, invalid_at: datetime | None) -> EntityEdge:
        return EntityEdge(
            group_id="g", source_node_uuid="a", target_node_uuid="b", name="R", fact=fact,
            created_at=ENDED, invalid_at=invalid_at,
        )  # fmt: skip

    naive = ENDED.replace(tzinfo=None)  # Kuzu reads dates naive: the same moment
    members = [edge("a", None), edge("b", ENDED), edge("c", None), edge("d", naive)]
    parts = passes.validity_parts(members)
    assert [[e.fact for e in part] for part in parts] == [["a", "c"], ["b", "d"]]
    assert passes.renamed(["x", "y", "z", "x"], {"y": "x", "z": "w"}) == ["x", "w"]
