"""The adapters that let relmerge use heta-framework's components as they are."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from heta_framework.common.models import (
    EmbeddingModelProtocol,
    EmbeddingRequest,
    EmbeddingResult,
    LanguageModelProtocol,
    ModelChunk,
    ModelRequest,
    ModelResult,
    TokenUsage,
)
from heta_framework.common.stores.object import LocalObjectStore

from relmerge.config import ResponseFormat
from relmerge.errors import InvalidKeyError, ProviderError, StoreError
from relmerge.integrations.heta.models import (
    HetaEmbeddingModel,
    HetaLanguageModel,
    embedding_model,
    flatten,
    language_model,
)
from relmerge.integrations.heta.store import HetaObjectStore, object_store
from relmerge.model import ExtractedRelation
from relmerge.prompts import merge_relations
from relmerge.providers.base import LLMRequest, NoLanguageModel
from relmerge.providers.embedding import HashEmbedder
from relmerge.stores import MemoryStore
from tests.factories import record
from tests.integrations.heta.support import HetaProtocolEmbedder, HetaProtocolModel


class Unauthorized(Exception):
    status_code = 401


class Scripted:
    """A heta-protocol model that answers or raises from a list."""

    def __init__(self, *answers: ModelResult | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[ModelRequest] = []

    @property
    def model_name(self) -> str:
        return "scripted"

    async def invoke(self, request: ModelRequest) -> ModelResult:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def invoke_many(self, requests: Sequence[ModelRequest]) -> list[ModelResult]:
        return [await self.invoke(request) for request in requests]

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        yield ModelChunk(text_delta=(await self.invoke(request)).text, model_name="scripted")


def _request(feedback: list[tuple[str, str]] | None = None, relaxed: bool = False) -> LLMRequest:
    relations = [ExtractedRelation(**record("r1")), ExtractedRelation(**record("r2"))]
    request = merge_relations.build_request(
        relations, temperature=0.0, description_chars=2000, feedback=feedback or []
    )
    return replace(request, relaxed=relaxed)


def test_a_retry_conversation_becomes_one_prompt_after_the_system_prompt() -> None:
    request = _request([('{"relation": {}}', "LLM output is missing a non-empty type field.")])
    system, prompt = flatten(request)
    assert system is not None and system.startswith("Task: relation_merge")
    question, rest = prompt.split("Your previous answer was:\n", 1)
    assert "```json" in question and '"relation_id": "r1"' in question
    assert rest.startswith('{"relation":{}}')
    assert "That answer is invalid: LLM output is missing a non-empty type field." in rest


async def test_requests_carry_the_options_and_relaxed_retries_no_response_format() -> None:
    text = '{"relation": {"type": "t", "name": "n", "description": "d", "attributes": {}}}'
    inner = Scripted(*(ModelResult(text=text, token_usage=TokenUsage(7, 3)) for _ in range(3)))
    modes: list[tuple[ResponseFormat, object]] = [
        ("json_object", {"type": "json_object"}),
        ("json_schema", "json_schema"),
        ("none", None),
    ]
    for mode, expected in modes:
        model = HetaLanguageModel(inner, mode)
        result = await model.invoke(_request())
        sent = inner.requests[-1].options
        assert sent is not None and sent.temperature == 0.0 and sent.max_output_tokens
        if expected == "json_schema":
            assert isinstance(sent.response_format, dict)
            assert sent.response_format["json_schema"]["name"] == "relation_merge"
        else:
            assert sent.response_format == expected
        assert result.parsed["relation"]["name"] == "n"  # parsed from the text
        assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (7, 3)
    relaxed = HetaLanguageModel(Scripted(ModelResult(text="{}")), "json_schema")
    await relaxed.invoke(
        _request([("x", "not JSON")]).__class__(
            **{**_request([("x", "not JSON")]).__dict__, "relaxed": True}
        )
    )
    options = relaxed.inner.requests[0].options  # type: ignore[attr-defined]
    assert options is not None and options.response_format is None


async def test_an_answer_cut_at_its_limit_is_truncated() -> None:
    model = HetaLanguageModel(Scripted(ModelResult(text='{"rel', finish_reason="length")), "none")
    result = await model.invoke(_request())
    assert result.truncated and result.parsed is None


async def test_failures_stop_the_run_until_the_model_has_answered_then_fail_one_attempt() -> None:
    ok = ModelResult(text="{}")
    model = HetaLanguageModel(
        Scripted(RuntimeError("connection refused"), ok, RuntimeError("timeout"), Unauthorized()),
        "json_object",
    )
    with pytest.raises(ProviderError) as first:
        await model.invoke(_request())
    assert not first.value.retryable  # a wrong endpoint must not fail every group in turn
    assert "models.language (scripted): RuntimeError: connection refused" in str(first.value)
    await model.invoke(_request())
    with pytest.raises(ProviderError) as later:
        await model.invoke(_request())
    assert later.value.retryable
    with pytest.raises(ProviderError) as refused:
        await model.invoke(_request())
    assert not refused.value.retryable  # 401: no retry can fix it


async def test_embeddings_come_in_batches_normalised_and_blank_texts_cost_nothing() -> None:
    inner = HetaProtocolEmbedder()
    model = HetaEmbeddingModel(inner, batch_size=2)
    texts = ["Ada leads Norrbeck", " ", "Quill Labs", "Oslo", ""]
    vectors = await model.embed(texts)
    assert [request.texts for request in inner.requests] == [
        ["Ada leads Norrbeck", "Quill Labs"],
        ["Oslo"],
    ]
    assert vectors.shape == (5, 512) and vectors.dtype == np.float32
    expected = await HashEmbedder().embed(["Ada leads Norrbeck", "Quill Labs", "Oslo"])
    assert np.allclose(vectors[[0, 2, 3]], expected, atol=1e-6)
    assert not vectors[[1, 4]].any()
    assert (await model.embed([])).shape == (0, 0)


async def test_an_embedder_that_loses_vectors_is_an_error() -> None:
    class Short:
        model_name = "short"

        async def embed(self, request: EmbeddingRequest) -> EmbeddingResult:
            return EmbeddingResult(vectors=[[1.0, 0.0]])

        async def embed_many(self, requests: Sequence[EmbeddingRequest]) -> list[EmbeddingResult]:
            return [await self.embed(request) for request in requests]

    assert isinstance(Short(), EmbeddingModelProtocol)
    with pytest.raises(ProviderError, match="returned 1 vectors for 2 texts"):
        await HetaEmbeddingModel(Short()).embed(["a", "b"])


async def test_heta_stores_read_write_and_fail_as_relmerge_stores(tmp_path: Path) -> None:
    store = HetaObjectStore(LocalObjectStore(tmp_path), "stores.objects")
    await store.put("a/b.json", b"{}")
    assert await store.get("a/b.json") == b"{}" and await store.exists("a/b.json")
    assert await store.list("a/") == ["a/b.json"]
    with pytest.raises(StoreError, match=r"no object 'a/c\.json' in stores\.objects"):
        await store.get("a/c.json")
    with pytest.raises(InvalidKeyError):
        await store.get("../outside.json")
    assert [type(item) for item in await store.get_many(["a/b.json", "x.json"])] == [
        bytes,
        StoreError,
    ]
    await store.delete("a/b.json")
    assert not await store.exists("a/b.json")


def test_relmerges_own_components_are_taken_as_they_are() -> None:
    none = NoLanguageModel()
    assert language_model(none, "models.language", "json_object") is none
    assert isinstance(
        language_model(HetaProtocolModel(), "models.language", "json_object"), HetaLanguageModel
    )
    assert isinstance(HetaProtocolModel(), LanguageModelProtocol)
    hashed = HashEmbedder()
    assert embedding_model(hashed, "models.embedding") is hashed
    memory = MemoryStore()
    assert object_store(memory, "stores.objects") is memory
