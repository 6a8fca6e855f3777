"""Small builders of relation records and step runs shared by the tests."""

from __future__ import annotations

import re
from typing import Any

import orjson

from relmerge import DeduplicateRelations, DeduplicateRelationsConfig, DictContext
from relmerge.model import Decision
from relmerge.providers.base import LanguageModel
from relmerge.providers.embedding import EmbeddingModel
from relmerge.run.result import RunOutput
from relmerge.stores import MemoryStore


def record(relation_id: str, **fields: Any) -> dict[str, Any]:
    """A valid relation dict; any field can be overridden."""
    base: dict[str, Any] = {
        "relation_id": relation_id,
        "chunk_id": f"chunk_{relation_id}",
        "document_id": "doc_1",
        "source_entity_id": "e_norrbeck",
        "target_entity_id": "e_ada",
        "source_entity_name": "Norrbeck Systems",
        "target_entity_name": "Ada Lind",
        "type": "employment",
        "name": "CEO of",
        "description": f"Description of {relation_id}.",
        "attributes": {},
    }
    base.update(fields)
    base.setdefault("source_chunk_ids", [base["chunk_id"]])
    return base


def store_with(records: list[dict[str, Any]]) -> tuple[MemoryStore, list[str]]:
    store = MemoryStore()
    keys = []
    for item in records:
        key = f"relations/{item['relation_id']}.json"
        store.objects[key] = orjson.dumps(item)
        keys.append(key)
    return store, keys


async def run_step(
    records: list[dict[str, Any]],
    llm: LanguageModel | None = None,
    mapping: dict[str, str] | None = None,
    embedder: EmbeddingModel | None = None,
    entities: list[dict[str, str]] | None = None,
    **config: Any,
) -> tuple[RunOutput, DictContext, MemoryStore]:
    """Run the step through a dict-backed context over a memory store.

    Without an ``embedder`` the semantic stage is off unless ``semantic_merge`` is given.
    """
    store, keys = store_with(records)
    config.setdefault("semantic_merge", embedder is not None)
    step = DeduplicateRelations(DeduplicateRelationsConfig(**config))
    artifacts: dict[str, Any] = {"relation_keys": keys, "entity_id_mapping": mapping or {}}
    if entities is not None:
        artifacts["entities"] = entities
    context = DictContext(
        components={
            "stores.objects": store,
            "models.language": llm,
            "models.embedding": embedder,
        },
        artifacts=artifacts,
    )
    output = await step.run(context)
    return output, context, store


def merge_answer(
    name: str = "CEO of", description: str = "Merged.", **extra: Any
) -> dict[str, Any]:
    relation = {"type": "employment", "name": name, "description": description, "attributes": {}}
    relation.update(extra)
    return {"relation": relation}


def step_log(store: MemoryStore, name: str) -> bytes:
    """A log the step wrote (``decisions.jsonl``, …): under a prefix naming its run, the one
    run in ``store``; a pipeline run's log sits at the root."""
    if name in store.objects:
        return store.objects[name]
    found = [key for key in store.objects if re.fullmatch(rf"[^/]+/[0-9a-f]{{16}}/{name}", key)]
    assert len(found) == 1, f"expected one {name} in the store, found {found}"
    return store.objects[found[0]]


def logged_decisions(store: MemoryStore, name: str = "decisions.jsonl") -> list[Decision]:
    """The decision log a run wrote into ``store``, as objects."""
    return [Decision.model_validate_json(line) for line in step_log(store, name).splitlines()]


def logged_clarifications(
    store: MemoryStore, name: str = "clarifications.jsonl"
) -> list[dict[str, Any]]:
    """The questions for a person a run wrote into ``store``."""
    return [orjson.loads(line) for line in step_log(store, name).splitlines()]
