"""Pieces of heta-framework builds for the tests: a local object store filled with
relations, models written in heta-framework's protocols, a build."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
from heta_framework.common.models import (
    EmbeddingRequest,
    EmbeddingResult,
    ModelChunk,
    ModelRequest,
    ModelResult,
    TokenUsage,
)
from heta_framework.common.stores.object import LocalObjectStore
from heta_framework.kb.builder import KnowledgeBaseBuilder
from heta_framework.kb.components import KnowledgeModels, KnowledgeStores
from heta_framework.kb.recipe import KnowledgeRecipe, RecipeItem
from heta_framework.kb.state import RecipeRunResult

from relmerge.eval.gold_judge import GoldJudge, task_of
from relmerge.providers.embedding import HashEmbedder
from tests.support.llm_server import fenced_records


async def put_relations(store: LocalObjectStore, records: Sequence[dict[str, Any]]) -> list[str]:
    """Each record as ``relations/<id>.json``, as heta-framework's extraction writes them."""
    keys = []
    for item in records:
        key = f"relations/{item['relation_id']}.json"
        await store.put(key, orjson.dumps(item))
        keys.append(key)
    return keys


def files(root: Path) -> set[str]:
    """Every object key under a local store's root."""
    return {path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file()}


def recipe(
    step: RecipeItem,
    store: object,
    language: object = None,
    embedding: object = None,
) -> KnowledgeRecipe:
    return KnowledgeRecipe(
        models=KnowledgeModels(language=language, embedding=embedding),
        stores=KnowledgeStores(objects=store),
        steps=(step,),
    )


async def build(
    step: RecipeItem,
    store: object,
    artifacts: Mapping[str, Any],
    language: object = None,
    embedding: object = None,
) -> RecipeRunResult:
    """One heta-framework build of a one-step recipe."""
    return await KnowledgeBaseBuilder().build(
        recipe(step, store, language, embedding), initial_artifacts=artifacts
    )


_HETA_RELATIONS = re.compile(r"Relations:\n(\[.*\])\s*$", re.DOTALL)


def prompt_records(prompt: str) -> list[dict[str, Any]]:
    """The records of a prompt: relmerge's ```json block, or heta-framework's own step's
    ``Relations:`` array."""
    records = fenced_records(prompt)
    if records is not None:
        return records
    match = _HETA_RELATIONS.search(prompt)
    return list(orjson.loads(match.group(1))) if match else []


class HetaProtocolModel:
    """A language model written in heta-framework's protocol (``LanguageModelProtocol``):
    relmerge's three tasks are answered from gold clusters (``GoldJudge``); heta-framework's
    own merge prompt by fusing its records into the first one's fields."""

    def __init__(
        self,
        gold: Mapping[str, str] | None = None,
        records: Iterable[Mapping[str, Any]] | None = None,
        fuse_all: bool = False,
    ) -> None:
        """``records``: the relations ``gold`` labels (``GoldJudge`` recognises records
        shown under other ids by them). ``fuse_all``: every merge request fuses its records
        into the first one's fields, in relmerge's task as in heta-framework's own prompt."""
        self.judge = GoldJudge(gold or {}, records=records)
        self.fuse_all = fuse_all
        self.requests: list[ModelRequest] = []

    @property
    def model_name(self) -> str:
        return "heta-protocol-gold"

    async def invoke(self, request: ModelRequest) -> ModelResult:
        self.requests.append(request)
        prompt = request.prompt or ""
        records = prompt_records(prompt)
        task = task_of(request.system_prompt or "")
        if task is None or (task == "relation_merge" and self.fuse_all):
            first = records[0]
            keys = ("type", "name", "description", "attributes")
            answer: dict[str, Any] = {"relation": {key: first[key] for key in keys}}
        else:
            answer = self.judge.answer(task, records)
        text = orjson.dumps(answer).decode()
        return ModelResult(
            text=text,
            parsed=answer,
            model_name=self.model_name,
            token_usage=TokenUsage(len(prompt) // 4, len(text) // 4, None),
            finish_reason="stop",
        )

    async def invoke_many(self, requests: Sequence[ModelRequest]) -> list[ModelResult]:
        return [await self.invoke(request) for request in requests]

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        result = await self.invoke(request)
        yield ModelChunk(text_delta=result.text, model_name=self.model_name)


class HetaProtocolEmbedder:
    """An embedding model written in heta-framework's protocol (``EmbeddingModelProtocol``):
    relmerge's hashed character n-grams, as plain lists of floats."""

    def __init__(self) -> None:
        self.inner = HashEmbedder()
        self.requests: list[EmbeddingRequest] = []

    @property
    def model_name(self) -> str:
        return "heta-protocol-hash"

    async def embed(self, request: EmbeddingRequest) -> EmbeddingResult:
        self.requests.append(request)
        vectors = await self.inner.embed(request.texts)
        return EmbeddingResult(vectors=vectors.tolist(), model_name=self.model_name)

    async def embed_many(self, requests: Sequence[EmbeddingRequest]) -> list[EmbeddingResult]:
        return [await self.embed(request) for request in requests]
