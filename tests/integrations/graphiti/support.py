"""Small Graphiti graphs built with graphiti-core's own API, with no LLM.

The graphs are written the way ``Graphiti.add_episode`` writes them
(``add_nodes_and_edges_bulk``: Episodic nodes, Entity nodes, MENTIONS edges, RELATES_TO
edges), or object by object (``EntityNode.save``, ``EntityEdge.save``...), on:

- FalkorDB: ``FalkorDriver(host, port, database=group_id)``; on FalkorDB a Graphiti group
  is a graph of its own, named after the group id;
- Kuzu: ``KuzuDriver(db=path)``, embedded; its full-text indexes are built by
  ``driver.graph_ops.build_indices_and_constraints(driver)`` (``KuzuDriver
  .build_indices_and_constraints`` is a no-op in graphiti-core 0.31.2).

Embeddings come from ``HashingEmbedder``: deterministic bag-of-words hashing, so equal texts
embed equally and texts that share words are close.
"""

from __future__ import annotations

import hashlib
import math
import re
import typing
from collections.abc import AsyncIterator, Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from graphiti_core.cross_encoder.client import CrossEncoderClient
from graphiti_core.driver.driver import GraphDriver, GraphProvider
from graphiti_core.edges import EntityEdge, EpisodicEdge, get_entity_edge_from_record
from graphiti_core.embedder.client import EmbedderClient
from graphiti_core.errors import GroupsEdgesNotFoundError
from graphiti_core.llm_client.client import LLMClient
from graphiti_core.llm_client.config import DEFAULT_MAX_TOKENS, ModelSize
from graphiti_core.models.edges.edge_db_queries import get_entity_edge_return_query
from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode
from graphiti_core.prompts.models import Message
from graphiti_core.utils.bulk_utils import add_nodes_and_edges_bulk
from pydantic import BaseModel

Backend = Literal["falkordb", "kuzu"]
BACKENDS: tuple[Backend, ...] = ("falkordb", "kuzu")

EMBEDDING_DIM = 64
BASE_TIME = datetime(2024, 1, 1, tzinfo=UTC)

_WORD = re.compile(r"[a-z0-9]+")
_PROMPT_NAME: ContextVar[str | None] = ContextVar("graphiti_prompt_name", default=None)


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class HashingEmbedder(EmbedderClient):
    """Graphiti's ``EmbedderClient``: each word adds ±1 at a hashed coordinate; the vector
    is L2-normalised (all-zero for a text with no word)."""

    def __init__(self, dim: int = EMBEDDING_DIM) -> None:
        self.dim = dim
        self.calls = 0

    def embed(self, text: str) -> list[float]:
        vector = [0.0] * self.dim
        for token in _tokens(text):
            digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "big") % self.dim
            vector[index] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in vector))
        return [x / norm for x in vector] if norm else vector

    async def create(
        self, input_data: str | list[str] | Iterable[int] | Iterable[Iterable[int]]
    ) -> list[float]:
        self.calls += 1
        if isinstance(input_data, str):
            return self.embed(input_data)
        items = list(input_data)
        if items and isinstance(items[0], str):
            return self.embed(str(items[0]))
        raise TypeError(f"HashingEmbedder embeds text only, not {type(input_data).__name__}")

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        self.calls += 1
        return [self.embed(text) for text in input_data_list]


class OverlapCrossEncoder(CrossEncoderClient):
    """A stub reranker: the share of the query's words found in each passage."""

    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        words = set(_tokens(query))
        scored = [
            (passage, len(words & set(_tokens(passage))) / max(len(words), 1))
            for passage in passages
        ]
        return sorted(scored, key=lambda item: item[1], reverse=True)


@dataclass
class LLMCall:
    prompt_name: str | None
    response_model: type[BaseModel] | None
    model_size: ModelSize
    messages: list[Message]


class ScriptedLLMClient(LLMClient):
    """Graphiti's ``LLMClient``, with no model behind it: it records every call
    (``generate_response`` receives ``prompt_name`` and ``response_model``) and answers
    from ``answers[prompt_name]`` (a dict, or a callable of the call), else fails."""

    def __init__(self, answers: dict[str, Any] | None = None) -> None:
        super().__init__(None)
        self.answers = answers or {}
        self.calls: list[LLMCall] = []

    async def generate_response(
        self,
        messages: list[Message],
        response_model: type[BaseModel] | None = None,
        max_tokens: int | None = None,
        model_size: ModelSize = ModelSize.medium,
        group_id: str | None = None,
        prompt_name: str | None = None,
        *,
        attribute_extraction: bool = False,
        model: str | None = None,
    ) -> dict[str, Any]:
        _PROMPT_NAME.set(prompt_name)
        return await super().generate_response(
            messages,
            response_model,
            max_tokens,
            model_size,
            group_id,
            prompt_name,
            attribute_extraction=attribute_extraction,
            model=model,
        )

    async def _generate_response(
        self,
        messages: list[Message],
        response_model: type[BaseModel] | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        model_size: ModelSize = ModelSize.medium,
        *,
        model: str | None = None,
    ) -> dict[str, typing.Any]:
        prompt_name = _PROMPT_NAME.get()
        call = LLMCall(prompt_name, response_model, model_size, list(messages))
        self.calls.append(call)
        if prompt_name not in self.answers:
            raise AssertionError(f"unexpected LLM call: {prompt_name}")
        answer = self.answers[prompt_name]
        result = answer(call) if callable(answer) else answer
        return dict(result)


@dataclass(frozen=True)
class Fact:
    """One RELATES_TO edge to write: ``source -[name]-> target`` stating ``fact``."""

    source: str
    target: str
    name: str
    fact: str
    valid_at: datetime | None = None
    invalid_at: datetime | None = None
    episodes: tuple[str, ...] = ("ep1",)


FactLike = Fact | tuple[str, str, str, str, datetime | None, datetime | None, Sequence[str]]


def as_fact(item: FactLike) -> Fact:
    if isinstance(item, Fact):
        return item
    source, target, name, fact, valid_at, invalid_at, episodes = item
    return Fact(source, target, name, fact, valid_at, invalid_at, tuple(episodes))


@dataclass
class BuiltGraph:
    """What ``build_graph`` wrote: nodes and episodes by name, edges in fact order."""

    group_id: str
    nodes: dict[str, EntityNode] = field(default_factory=dict)
    episodes: dict[str, EpisodicNode] = field(default_factory=dict)
    edges: list[EntityEdge] = field(default_factory=list)

    def edge(self, fact: str) -> EntityEdge:
        return next(edge for edge in self.edges if edge.fact == fact)


async def open_graph(
    kind: Backend,
    tmp_path: Path,
    *,
    group_id: str = "g1",
    host: str = "127.0.0.1",
    port: int | None = None,
) -> GraphDriver:
    """A graphiti-core driver on an empty graph with its indexes built.

    FalkorDB: ``host``/``port`` of a running server; the graph is named ``group_id``
    (a name no other test uses keeps tests apart on one server). Kuzu: a database file
    under ``tmp_path``; ``group_id`` is only a property there."""
    if kind == "falkordb":
        from graphiti_core.driver.falkordb_driver import FalkorDriver

        if port is None:
            raise ValueError("open_graph('falkordb') needs the server's port")
        falkor = FalkorDriver(host=host, port=port, database=group_id)
        # The constructor schedules build_indices_and_constraints() on the running loop:
        # writing before it is done races the index creation.
        if falkor._init_task is not None:
            await falkor._init_task
        else:
            await falkor.build_indices_and_constraints()
        return falkor
    if kind == "kuzu":
        import warnings

        from graphiti_core.driver.kuzu_driver import KuzuDriver

        with warnings.catch_warnings():
            # 0.31.2 warns that its Kuzu backend is deprecated (Kuzu is unmaintained).
            warnings.simplefilter("ignore", DeprecationWarning)
            kuzu_driver = KuzuDriver(db=str(tmp_path / f"{group_id}.kuzu"))
        await kuzu_driver.graph_ops.build_indices_and_constraints(kuzu_driver)
        return kuzu_driver
    raise ValueError(f"unknown backend: {kind}")


async def build_graph(
    driver: GraphDriver,
    group_id: str,
    facts: Iterable[FactLike],
    *,
    embedder: EmbedderClient | None = None,
    bulk: bool = True,
) -> BuiltGraph:
    """Write ``facts`` as a Graphiti graph: one Entity per name (summary
    ``"<name> summary"``), one Episodic node per episode name (``entity_edges``: the edges
    naming it), MENTIONS from each episode to the entities of its edges, one RELATES_TO
    edge per fact (``episodes``: its episodes' uuids). Embeddings from ``embedder``
    (default ``HashingEmbedder``). ``bulk``: one ``add_nodes_and_edges_bulk`` call (as
    ``add_episode`` does) rather than ``save`` per object."""
    embedder = embedder or HashingEmbedder()
    rows = [as_fact(item) for item in facts]
    built = BuiltGraph(group_id)
    tick = 0

    def next_time() -> datetime:
        nonlocal tick
        tick += 1
        return BASE_TIME + timedelta(minutes=tick)

    for fact in rows:
        for name in (fact.source, fact.target):
            if name not in built.nodes:
                built.nodes[name] = EntityNode(
                    name=name,
                    group_id=group_id,
                    labels=["Entity"],
                    summary=f"{name} summary",
                    created_at=next_time(),
                )
        for episode_name in fact.episodes:
            if episode_name not in built.episodes:
                at = next_time()
                built.episodes[episode_name] = EpisodicNode(
                    name=episode_name,
                    group_id=group_id,
                    source=EpisodeType.text,
                    source_description="relmerge test",
                    content=f"episode {episode_name}",
                    valid_at=at,
                    created_at=at,
                )

    mentions: dict[tuple[str, str], EpisodicEdge] = {}
    for fact in rows:
        edge = EntityEdge(
            group_id=group_id,
            source_node_uuid=built.nodes[fact.source].uuid,
            target_node_uuid=built.nodes[fact.target].uuid,
            name=fact.name,
            fact=fact.fact,
            episodes=[built.episodes[name].uuid for name in fact.episodes],
            created_at=next_time(),
            valid_at=fact.valid_at,
            invalid_at=fact.invalid_at,
        )
        await edge.generate_embedding(embedder)
        built.edges.append(edge)
        for episode_name in fact.episodes:
            episode = built.episodes[episode_name]
            episode.entity_edges.append(edge.uuid)
            for name in (fact.source, fact.target):
                key = (episode.uuid, built.nodes[name].uuid)
                if key not in mentions:
                    mentions[key] = EpisodicEdge(
                        group_id=group_id,
                        source_node_uuid=episode.uuid,
                        target_node_uuid=built.nodes[name].uuid,
                        created_at=episode.created_at,
                    )
    for node in built.nodes.values():
        await node.generate_name_embedding(embedder)

    if bulk:
        await add_nodes_and_edges_bulk(
            driver,
            list(built.episodes.values()),
            list(mentions.values()),
            list(built.nodes.values()),
            built.edges,
            embedder,
        )
    else:
        for episode in built.episodes.values():
            await episode.save(driver)
        for node in built.nodes.values():
            await node.save(driver)
        for mention in mentions.values():
            await mention.save(driver)
        for edge in built.edges:
            await edge.save(driver)
    return built


# FalkorDB's range index answers `e.uuid < $cursor` on strings by the first character only
# (every uuid whose first character is <= the cursor's), so graphiti's own cursor paging
# (`EntityEdge.get_by_group_ids(limit=, uuid_cursor=)`: ORDER BY e.uuid DESC, e.uuid <
# $uuid) repeats pages there, for ever once a first-character bucket holds `limit` edges.
# `e.uuid + ''` is no longer an indexed property: the filter is exact.
_FALKOR_EDGE_PAGE = (
    """
    MATCH (n:Entity)-[e:RELATES_TO]->(m:Entity)
    WHERE e.group_id IN $group_ids AND ($uuid IS NULL OR e.uuid + '' < $uuid)
    RETURN
    """
    + get_entity_edge_return_query(GraphProvider.FALKORDB)
    + """, e.fact_embedding AS fact_embedding
    ORDER BY e.uuid DESC
    LIMIT $limit
    """
)


async def read_edge_pages(
    driver: GraphDriver, group_id: str, page_size: int
) -> AsyncIterator[list[EntityEdge]]:
    """Every RELATES_TO edge of the group, with its embedding, ``page_size`` at a time in
    descending uuid order: graphiti's ``get_by_group_ids`` cursor paging, except on
    FalkorDB where the same query is run with an index-proof cursor filter."""
    cursor: str | None = None
    while True:
        if driver.provider == GraphProvider.FALKORDB:
            records, _, _ = await driver.execute_query(
                _FALKOR_EDGE_PAGE, group_ids=[group_id], uuid=cursor, limit=page_size
            )
            edges = [get_entity_edge_from_record(r, driver.provider) for r in records]
        else:
            try:
                edges = await EntityEdge.get_by_group_ids(
                    driver, [group_id], limit=page_size, uuid_cursor=cursor, with_embeddings=True
                )
            except GroupsEdgesNotFoundError:  # an empty page is an error, not []
                edges = []
        if not edges:
            return
        if cursor is not None and edges[0].uuid >= cursor:
            raise RuntimeError(f"edge paging made no progress past {cursor}")
        yield edges
        if len(edges) < page_size:
            return
        cursor = edges[-1].uuid
