"""The arrival path: relmerge answers Graphiti's duplicate question as edges arrive
(``relmerge.integrations.graphiti.arrival``), on a real embedded Kuzu graph written by
``Graphiti.add_triplet`` / ``add_episode`` with a scripted inner model."""

from __future__ import annotations

import importlib.metadata
import os
import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
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
from graphiti_core.graphiti import Graphiti  # noqa: E402
from graphiti_core.nodes import EntityNode, EpisodeType  # noqa: E402
from graphiti_core.prompts.dedupe_edges import EdgeDuplicate  # noqa: E402

from relmerge.config import DeduplicateRelationsConfig  # noqa: E402
from relmerge.integrations.graphiti.arrival import (  # noqa: E402
    RESOLVE_EDGE,
    GraphitiContractError,
    GraphitiVersionError,
    RelmergeDedupeClient,
    check_graphiti_version,
    wrap_graphiti,
)
from relmerge.providers.base import LLMRequest, LLMResult  # noqa: E402
from relmerge.providers.embedding import HashEmbedder  # noqa: E402
from tests.integrations.graphiti.support import (  # noqa: E402
    HashingEmbedder,
    LLMCall,
    OverlapCrossEncoder,
    ScriptedLLMClient,
    open_graph,
)
from tests.support.falkordb_server import FalkorDBServer, falkordb_server_fixture  # noqa: E402

T = datetime(2024, 3, 1, tzinfo=UTC)
WORKS = "Alice works at Acme as a software engineer"
REWORDED = "Alice works at Acme as software engineer"  # not graphiti's verbatim fast path
NO_DUPLICATE: dict[str, list[int]] = {"duplicate_facts": [], "contradicted_facts": []}


class KeepBothJudge:
    """A relmerge ``LanguageModel`` that answers ``relation_judge`` with keep_both and
    records the requests (their text shows the entity profiles)."""

    name = "keep-both"
    available = True

    def __init__(self) -> None:
        self.requests: list[LLMRequest] = []

    async def invoke(self, request: LLMRequest) -> LLMResult:
        self.requests.append(request)
        answer = {"verdict": "keep_both", "reason": "different facts", "duplicate_of": None}
        return LLMResult(text=str(answer), parsed=answer, model=self.name)


@dataclass
class Setup:
    graphiti: Graphiti
    inner: ScriptedLLMClient
    client: RelmergeDedupeClient
    nodes: dict[str, EntityNode]

    def resolve_calls(self) -> list[LLMCall]:
        return [call for call in self.inner.calls if call.prompt_name == RESOLVE_EDGE]

    async def add(
        self, source: str, target: str, name: str, fact: str, valid_at: datetime = T
    ) -> list[EntityEdge]:
        edge = EntityEdge(
            group_id="g1",
            source_node_uuid=self.nodes[source].uuid,
            target_node_uuid=self.nodes[target].uuid,
            name=name,
            fact=fact,
            episodes=[],
            created_at=T,
            valid_at=valid_at,  # dated: graphiti asks no timestamp prompt
        )
        result = await self.graphiti.add_triplet(self.nodes[source], edge, self.nodes[target])
        return result.edges

    async def edges(self) -> list[str]:
        found = await EntityEdge.get_by_group_ids(self.graphiti.driver, ["g1"])
        return sorted(edge.fact for edge in found)


async def _setup(
    tmp_path: Path,
    answers: dict[str, Any],
    judge_llm: KeepBothJudge | None = None,
    driver: GraphDriver | None = None,
) -> Setup:
    if driver is None:
        driver = await open_graph("kuzu", tmp_path, group_id="g1")
    inner = ScriptedLLMClient(answers)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        graphiti = Graphiti(
            graph_driver=driver,
            embedder=HashingEmbedder(),
            llm_client=inner,
            cross_encoder=OverlapCrossEncoder(),
        )
    client = wrap_graphiti(
        graphiti,
        judge_llm,
        embedder=HashEmbedder(),
        config=DeduplicateRelationsConfig(canaries=0),
    )
    nodes = {}
    for name in ("Alice", "Acme"):
        node = EntityNode(name=name, group_id="g1", labels=["Entity"], summary=f"{name} profile")
        await node.generate_name_embedding(graphiti.embedder)
        await node.save(driver)
        nodes[name] = node
    return Setup(graphiti, inner, client, nodes)


@pytest.fixture
async def rules_only(tmp_path: Path) -> AsyncIterator[Setup]:
    # The inner model would call everything a duplicate of the first edge.
    setup = await _setup(
        tmp_path, {RESOLVE_EDGE: {"duplicate_facts": [0], "contradicted_facts": []}}
    )
    yield setup
    await setup.graphiti.driver.close()


async def test_a_reworded_duplicate_is_resolved_by_the_rules_without_the_inner_model(
    rules_only: Setup,
) -> None:
    (first,) = await rules_only.add("Alice", "Acme", "WORKS_AT", WORKS)
    assert rules_only.inner.calls == []  # nothing to compare yet
    resolved = await rules_only.add("Alice", "Acme", "WORKS_AT", REWORDED)

    assert resolved[0].uuid == first.uuid  # graphiti kept the existing edge
    assert rules_only.resolve_calls() == []  # ...and never asked the inner model
    assert await rules_only.edges() == [WORKS]
    stats = rules_only.client.stats
    assert (stats.questions, stats.rules_duplicate, stats.inner_resolve_calls) == (1, 1, 0)
    assert stats.verdicts[0].tier == "fuzzy_high"


async def test_a_different_fact_is_not_a_duplicate(tmp_path: Path) -> None:
    judge = KeepBothJudge()
    # A sloppy inner model: every new fact a duplicate of idx 0, which it also contradicts.
    sloppy = {"duplicate_facts": [0], "contradicted_facts": []}
    setup = await _setup(tmp_path, {RESOLVE_EDGE: sloppy}, judge)
    try:
        await setup.add("Alice", "Acme", "JOINED", "Alice joined Acme in 2019")
        for fact in ("Alice joined Acme in 2021", "Alice is the CTO of Acme"):
            resolved = await setup.add("Alice", "Acme", "JOINED", fact)
            assert resolved[0].fact == fact  # a new edge, not the existing one
        assert await setup.edges() == sorted(
            ["Alice joined Acme in 2019", "Alice joined Acme in 2021", "Alice is the CTO of Acme"]
        )
        # The rules could not decide (guards): relmerge's judge asked judge_llm, with both
        # entities' summaries as profiles; the inner model was asked for contradictions.
        assert setup.client.stats.judged == 2
        assert judge.requests and all(r.task == "relation_judge" for r in judge.requests)
        text = "\n".join(m.content for m in judge.requests[0].messages)
        assert "Alice profile" in text and "Acme profile" in text
        assert len(setup.resolve_calls()) == 2
    finally:
        await setup.graphiti.driver.close()


@pytest.fixture(scope="module")
def falkordb() -> Iterator[FalkorDBServer]:
    yield from falkordb_server_fixture()


async def test_on_falkordb_a_different_fact_goes_to_the_judge_with_profiles(
    tmp_path: Path, falkordb: FalkorDBServer
) -> None:
    judge = KeepBothJudge()
    sloppy = {"duplicate_facts": [0], "contradicted_facts": []}
    driver = await open_graph("falkordb", tmp_path, group_id="g1", port=falkordb.port)
    setup = await _setup(tmp_path, {RESOLVE_EDGE: sloppy}, judge, driver)
    try:
        (first,) = await setup.add("Alice", "Acme", "WORKS_AT", WORKS)
        assert (await setup.add("Alice", "Acme", "WORKS_AT", REWORDED))[0].uuid == first.uuid
        assert setup.resolve_calls() == []  # the rules decided the duplicate
        await setup.add("Alice", "Acme", "JOINED", "Alice joined Acme in 2019")
        await setup.add("Alice", "Acme", "JOINED", "Alice joined Acme in 2021")
        assert len(await setup.edges()) == 3
        text = "\n".join(m.content for m in judge.requests[-1].messages)
        assert "Alice profile" in text and "Acme profile" in text
    finally:
        await driver.close()


async def test_contradictions_stay_the_inner_models(
    tmp_path: Path,
) -> None:
    # The inner model: no duplicate, but the new fact contradicts idx 0 (Graphiti's own
    # answer, kept as it is: the old edge is invalidated the Graphiti way).
    contradicts = {"duplicate_facts": [], "contradicted_facts": [0]}
    setup = await _setup(tmp_path, {RESOLVE_EDGE: contradicts})
    try:
        await setup.add("Alice", "Acme", "WORKS_AT", WORKS)
        later = datetime(2025, 1, 1, tzinfo=UTC)
        edges = await setup.add(
            "Alice", "Acme", "LEFT", "Alice does not work at Acme anymore", later
        )
        new, *invalidated = edges
        assert new.fact == "Alice does not work at Acme anymore"
        assert [edge.fact for edge in invalidated] == [WORKS]
        assert invalidated[0].invalid_at is not None
        # The rules could not decide (negation guard) and there is no judge_llm: the
        # inner model's own answer stands, duplicate half included.
        assert setup.client.stats.graphiti_decided == 1
        (call,) = setup.resolve_calls()  # exactly as graphiti asked it
        assert call.response_model is EdgeDuplicate
        assert "<NEW FACT>\nAlice does not work at Acme anymore\n</NEW FACT>" in (
            call.messages[1].content
        )
    finally:
        await setup.graphiti.driver.close()


async def test_other_prompts_reach_the_inner_client_unchanged(tmp_path: Path) -> None:
    wrapped = RelmergeDedupeClient(ScriptedLLMClient({"extract_nodes.extract_message": {"x": 1}}))
    from graphiti_core.prompts.models import Message

    messages = [Message(role="system", content="sys"), Message(role="user", content="hello")]
    answer = await wrapped.generate_response(
        list(messages), None, None, prompt_name="extract_nodes.extract_message"
    )
    assert answer == {"x": 1}
    inner = wrapped.inner
    assert isinstance(inner, ScriptedLLMClient)
    (call,) = inner.calls
    assert call.prompt_name == "extract_nodes.extract_message"
    # What the inner client received is what graphiti's base client makes of the messages.
    assert call.messages[1].content.startswith("hello")
    assert wrapped.stats.questions == 0


async def test_add_episode_resolves_a_reworded_duplicate_and_extraction_reaches_inner(
    tmp_path: Path,
) -> None:
    facts = iter([WORKS, REWORDED])

    def extract_edges(call: LLMCall) -> dict[str, Any]:
        fact = next(facts)
        assert fact.rstrip(".") in call.messages[1].content  # graphiti's own prompt
        edge = {"source_entity_name": "Alice", "target_entity_name": "Acme"}
        edge |= {"relation_type": "WORKS_AT", "fact": fact, "valid_at": "2024-03-01T00:00:00Z"}
        return {"edges": [edge]}

    entities = [{"name": "Alice", "entity_type_id": 0}, {"name": "Acme", "entity_type_id": 0}]
    answers: dict[str, Any] = {
        "extract_nodes.extract_text": {"extracted_entities": entities},
        "extract_edges.edge": extract_edges,
        RESOLVE_EDGE: {"duplicate_facts": [], "contradicted_facts": []},  # never asked
    }
    setup = await _setup(tmp_path, answers)
    try:
        results = []
        for index, body in enumerate([WORKS + ".", REWORDED + "."]):
            results.append(
                await setup.graphiti.add_episode(
                    name=f"ep{index}",
                    episode_body=body,
                    source=EpisodeType.text,
                    source_description="test",
                    reference_time=T,
                    # no group_id: on Kuzu, graphiti-core 0.31.2's add_episode(group_id=...)
                    # reads KuzuDriver._database, which Kuzu's driver does not have
                )
            )
        first, second = (result.edges for result in results)
        assert second[0].uuid == first[0].uuid  # the reworded fact is the existing edge
        assert len(second[0].episodes) == 2  # ...and gained the second episode
        names = [call.prompt_name for call in setup.inner.calls]
        assert names == ["extract_nodes.extract_text", "extract_edges.edge"] * 2
        assert setup.client.stats.rules_duplicate == 1
    finally:
        await setup.graphiti.driver.close()


async def test_a_question_without_its_context_fails_loudly() -> None:
    from graphiti_core.prompts.models import Message

    client = RelmergeDedupeClient(ScriptedLLMClient({RESOLVE_EDGE: NO_DUPLICATE}))
    with pytest.raises(GraphitiContractError, match="prompt_library=relmerge_prompt_library"):
        await client.generate_response(
            [Message(role="user", content="x")], EdgeDuplicate, prompt_name=RESOLVE_EDGE
        )


async def test_a_stale_context_is_not_used() -> None:
    from graphiti_core.prompts.models import Message

    from relmerge.integrations.graphiti.arrival import relmerge_prompt_library

    client = RelmergeDedupeClient(ScriptedLLMClient({RESOLVE_EDGE: NO_DUPLICATE}))
    context = {"existing_edges": [{"idx": 0, "fact": WORKS}], "new_edge": REWORDED}
    context["edge_invalidation_candidates"] = []
    relmerge_prompt_library().dedupe_edges.resolve_edge(context)  # captured...
    other = [Message(role="system", content="s"), Message(role="user", content="another")]
    with pytest.raises(GraphitiContractError, match="not this call's"):
        await client.generate_response(other, EdgeDuplicate, prompt_name=RESOLVE_EDGE)


def test_an_untested_graphiti_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    assert check_graphiti_version().startswith("0.31.")
    with pytest.raises(GraphitiVersionError, match=r"graphiti-core 0\.32\.0 is not a tested"):
        check_graphiti_version("0.32.0")
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "1.0.0")
    with pytest.raises(GraphitiVersionError, match=r"1\.0\.0"):
        RelmergeDedupeClient(ScriptedLLMClient())
