"""relmerge's step in real heta-framework builds: a recipe with Heta's local object store and
Heta's own language model (pointed at the loopback test server) or a model written in
Heta's protocol, semantic merge on and off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from heta_framework.common.models.language.model import LanguageModel
from heta_framework.common.stores.object import LocalObjectStore
from heta_framework.kb.steps import KnowledgeStepProtocol, StepIssue

from relmerge import DeduplicateRelations as CoreStep
from relmerge import DeduplicateRelationsConfig as CoreConfig
from relmerge import DictContext
from relmerge.eval.gold_judge import GoldJudge
from relmerge.integrations.heta import (
    DeduplicateRelations,
    DeduplicateRelationsConfig,
    DeduplicateRelationsResult,
)
from relmerge.providers.embedding import HashEmbedder
from relmerge.providers.openai_compat import OpenAICompatibleModel
from relmerge.stores import LocalStore
from tests.integrations.heta.data import (
    ENTITY_MAPPING,
    GOLD,
    RECORDS,
    gold_partition,
    partition,
)
from tests.integrations.heta.support import (
    HetaProtocolEmbedder,
    HetaProtocolModel,
    build,
    files,
    put_relations,
)
from tests.support.gold_judge import gold_task_handler
from tests.support.llm_server import LLMServer

SEMANTIC = pytest.mark.parametrize("semantic", [True, False], ids=["semantic", "exact-only"])
# Exact-only: the exact key (mapped ids, name, type) groups c1, c2 and c4; the model keeps
# the 1990 record apart. The semantic stage also merges the other wordings of one fact.
EXACT_ONLY = {
    frozenset({"c1", "c2"}),
    frozenset({"c4"}),
    frozenset({"c3"}),
    frozenset({"a1"}),
    frozenset({"a2"}),
    frozenset({"h1"}),
}
# The LLM decides what the rules would not: every pair is its question.
LLM_DECIDES: dict[str, Any] = {"auto_merge_cosine": None}


def _artifacts(keys: list[str]) -> dict[str, Any]:
    return {"relation_keys": keys, "entity_id_mapping": ENTITY_MAPPING}


def _check_outputs(result: Any, root: Path, semantic: bool) -> DeduplicateRelationsResult:
    assert result.record.status == "succeeded", result.record.step_records[-1].error
    mapping = result.artifacts["relation_id_mapping"]
    assert set(mapping) == set(GOLD)  # every input id, each once
    assert partition(mapping) == (gold_partition() if semantic else EXACT_ONLY)
    outcome = result.artifacts["deduplicate_relations_result"]
    assert isinstance(outcome, DeduplicateRelationsResult)
    keys = result.artifacts["deduplicated_relation_keys"]
    assert outcome.relation_keys == keys and len(keys) == len(set(mapping.values()))
    for key in keys:  # written, as relations with every input chunk id of their members
        relation = orjson.loads((root / key).read_bytes())
        members = [old for old, new in mapping.items() if new == relation["relation_id"]]
        assert set(relation["source_chunk_ids"]) == {f"chunk_{m}" for m in members}
    merges = len(GOLD) - len(keys)
    assert outcome.exact_merge_count + outcome.semantic_merge_count == merges
    assert outcome.exact_merge_count == 1  # c1 + c2, wherever it was decided
    assert outcome.issues == () and result.issues == ()
    assert outcome.details["llm_requests"] > 0
    return outcome


@SEMANTIC
async def test_a_recipe_builds_with_hetas_openai_compatible_model(
    tmp_path: Path, semantic: bool
) -> None:
    store = LocalObjectStore(tmp_path)
    keys = await put_relations(store, RECORDS)
    step = DeduplicateRelations(DeduplicateRelationsConfig(semantic_merge=semantic, **LLM_DECIDES))
    assert isinstance(step, KnowledgeStepProtocol)
    with LLMServer(handler=gold_task_handler(GoldJudge(GOLD, records=RECORDS))) as server:
        model = LanguageModel(
            model_name="openai/gold-judge", api_base=server.base_url, api_key="sk-test-1234"
        )
        embedder = HetaProtocolEmbedder() if semantic else None
        result = await build(step, store, _artifacts(keys), model, embedder)
        sent = server.requests
    _check_outputs(result, tmp_path, semantic)
    assert sent and all(body["response_format"] == {"type": "json_object"} for body in sent)
    assert {body["model"] for body in sent} == {"gold-judge"}
    if semantic:
        assert embedder is not None and embedder.requests


@SEMANTIC
async def test_a_recipe_builds_with_a_model_written_in_hetas_protocol(
    tmp_path: Path, semantic: bool
) -> None:
    store = LocalObjectStore(tmp_path)
    keys = await put_relations(store, RECORDS)
    model = HetaProtocolModel(GOLD, RECORDS)
    step = DeduplicateRelations(
        DeduplicateRelationsConfig(
            semantic_merge=semantic, response_format="json_schema", **LLM_DECIDES
        )
    )
    embedder = HetaProtocolEmbedder() if semantic else None
    result = await build(step, store, _artifacts(keys), model, embedder)
    outcome = _check_outputs(result, tmp_path, semantic)
    assert len(model.requests) == outcome.details["llm_requests"]
    for request in model.requests:
        options = request.options
        assert options is not None and options.temperature == 0.0
        assert isinstance(options.response_format, dict)
        assert options.response_format["type"] == "json_schema"
        assert request.trace_context is not None
        assert request.trace_context["step"] == "deduplicate_relations"


@SEMANTIC
async def test_the_heta_step_decides_as_relmerges_own_step(tmp_path: Path, semantic: bool) -> None:
    """The adapters change nothing: Heta's model and store, or relmerge's, same outputs."""
    store = LocalObjectStore(tmp_path / "heta")
    keys = await put_relations(store, RECORDS)
    config: dict[str, Any] = {"semantic_merge": semantic, **LLM_DECIDES}
    with LLMServer(handler=gold_task_handler(GoldJudge(GOLD, records=RECORDS))) as server:
        model = LanguageModel(
            model_name="openai/gold-judge", api_base=server.base_url, api_key="sk-test"
        )
        embedder = HetaProtocolEmbedder() if semantic else None
        step = DeduplicateRelations(DeduplicateRelationsConfig(**config))
        result = await build(step, store, _artifacts(keys), model, embedder)
        own_store = LocalStore(tmp_path / "relmerge")
        for item in RECORDS:
            await own_store.put(f"relations/{item['relation_id']}.json", orjson.dumps(item))
        own_model = OpenAICompatibleModel(
            base_url=server.base_url, model="gold-judge", response_format="json_object"
        )
        context = DictContext(
            {
                "stores.objects": own_store,
                "models.language": own_model,
                "models.embedding": HashEmbedder() if semantic else None,
            },
            _artifacts(keys),
        )
        own = await CoreStep(CoreConfig(**config)).run(context)
        await own_model.aclose()
    assert result.artifacts["relation_id_mapping"] == own.relation_id_mapping
    assert list(result.artifacts["deduplicated_relation_keys"]) == own.relation_keys
    for key in own.relation_keys:
        assert (tmp_path / "heta" / key).read_bytes() == (tmp_path / "relmerge" / key).read_bytes()
    outcome = result.artifacts["deduplicate_relations_result"]
    assert outcome.details["llm_requests"] == own.result["llm_requests"]


async def test_issues_reach_the_build_report_as_heta_step_issues(tmp_path: Path) -> None:
    """A group whose every answer is invalid is reported in the build report."""
    store = LocalObjectStore(tmp_path)
    keys = await put_relations(store, RECORDS)
    with LLMServer(handler=lambda body: _prose()) as server:
        model = LanguageModel(
            model_name="openai/confused", api_base=server.base_url, api_key="sk-test"
        )
        step = DeduplicateRelations(DeduplicateRelationsConfig(semantic_merge=False))
        result = await build(step, store, _artifacts(keys), model)
        assert len(server.requests) == step.config.max_attempts  # one group, max_attempts
    assert result.record.status == "succeeded"
    (issue,) = result.issues
    assert isinstance(issue, StepIssue)
    assert issue.step == "deduplicate_relations" and issue.code == "deduplication_failed"
    assert issue.subject.type == "dedup_group"
    assert issue.subject.id == "Norrbeck Systems|Ada Lind|CEO of|employment"
    assert issue.resolution is not None and issue.resolution.action == "kept_original_records"
    assert result.record.step_records[0].issues == (issue,)
    assert result.artifacts["deduplicate_relations_result"].failed_group_count == 1


def _prose() -> Any:
    from tests.support.llm_server import Reply

    return Reply(content="I think these relations are probably the same.")


async def test_a_model_endpoint_that_refuses_fails_the_build_with_a_clear_error(
    tmp_path: Path,
) -> None:
    from tests.support.llm_server import Reply

    store = LocalObjectStore(tmp_path)
    keys = await put_relations(store, RECORDS)
    secret = "sk-secret-abcdef123456"
    with LLMServer(handler=lambda body: Reply(status=401)) as server:
        model = LanguageModel(
            model_name="openai/x", api_base=server.base_url, api_key=secret, max_retries=0
        )
        step = DeduplicateRelations(DeduplicateRelationsConfig(semantic_merge=False))
        result = await build(step, store, _artifacts(keys), model)
        assert len(server.requests) == 1  # not retried group after group
    assert result.record.status == "failed"
    error = result.record.step_records[0].error or ""
    assert error.startswith("ProviderError: models.language (openai/x): ")
    assert secret not in error
    assert files(tmp_path) == set(keys)  # nothing written
