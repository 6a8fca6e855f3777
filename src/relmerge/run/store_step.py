"""``MergeIntoStore``: the store merge as a build step (DESIGN §8), next to
``DeduplicateRelations``.

It takes the batch as that step does (the ``relation_keys`` artifact, read from the
``stores.objects`` component; the entity mapping and entity artifacts) and merges it into
the relation store of the ``stores.relations`` component: a URL
(``sqlite:///graph.db``, ``postgresql://…``; opened and closed by the step) or an open
:class:`~relmerge.graphstore.base.RelationStore` (left open). The relations the batch
inserted or joined are written as relation files under ``deduplicated_relations_prefix``
(as stored now, stored ids kept), and its logs under ``{logs_prefix}/{batch id}/``;
the artifacts are those of ``DeduplicateRelations``: the result, the keys written and
the mapping input id -> stored id.

>>> step = MergeIntoStore()
>>> step.requirements.components
('stores.objects', 'stores.relations', 'models.language', 'models.embedding')
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from relmerge.cache import RunCache
from relmerge.config import DeduplicateRelationsConfig
from relmerge.context import StepContext
from relmerge.errors import InputError
from relmerge.graphstore import open_graph_store
from relmerge.graphstore.base import RelationStore
from relmerge.io.load import read_store_keys
from relmerge.io.write import jsonl, relation_key, write_files
from relmerge.providers.base import LanguageModel, NoLanguageModel
from relmerge.providers.embedding import EmbeddingModel
from relmerge.run.step import (
    KEYS_ARTIFACT,
    MAPPING_ARTIFACT,
    RESULT_ARTIFACT,
    StepCapabilities,
    StepRequirements,
    entities_artifact,
    log_names,
    not_a_language_model,
    required_artifact,
)
from relmerge.run.store_merge import StoreMerge, StoreMergeOutput
from relmerge.stores.base import ObjectStore

STORE_COMPONENT = "stores.relations"
STEP_NAME = "merge_into_store"


@dataclass
class MergeIntoStoreOutput:
    """The merge's output, and the keys the step wrote (relation files, then logs)."""

    merge: StoreMergeOutput
    relation_keys: list[str] = field(default_factory=list)
    log_keys: list[str] = field(default_factory=list)

    @property
    def result(self) -> dict[str, Any]:
        figures = self.merge.result.to_dict()
        return {
            **figures,
            "log_keys": self.log_keys,
            "issues": [issue.model_dump(mode="json") for issue in self.merge.issues],
        }


@contextlib.asynccontextmanager
async def relation_store(component: Any) -> AsyncIterator[RelationStore]:
    """The step's relation store: opened from a URL (and closed), or given open."""
    if isinstance(component, str):
        async with open_graph_store(component) as store:
            await store.info(last=0)  # unreachable or another schema version: one line
            yield store
    elif isinstance(component, RelationStore):
        yield component
    else:
        raise InputError(
            f"component {STORE_COMPONENT!r} is missing or is neither a relation store URL "
            "(sqlite:///PATH, postgresql://…) nor a relation store"
        )


class MergeIntoStore:
    """Merge the relations of the current build batch into a relation store."""

    name = STEP_NAME

    def __init__(
        self, config: DeduplicateRelationsConfig | None = None, cache: RunCache | None = None
    ) -> None:
        """``cache`` keeps LLM answers across builds, as in ``DeduplicateRelations``."""
        self.config = config or DeduplicateRelationsConfig()
        self.cache = cache

    @property
    def requirements(self) -> StepRequirements:
        components = ["stores.objects", STORE_COMPONENT, "models.language"]
        if self.config.semantic_merge:
            components.append("models.embedding")
        artifacts = [self.config.relation_keys_artifact]
        if self.config.entity_id_mapping_artifact is not None:
            artifacts.append(self.config.entity_id_mapping_artifact)
        return StepRequirements(tuple(components), tuple(artifacts))

    @property
    def capabilities(self) -> StepCapabilities:
        logs = f"{self.config.logs_prefix}/{{batch_id}}"
        writes = (
            f"{self.config.deduplicated_relations_prefix}/{{relation_id}}.json",
            *(f"{logs}/{name}" for name in log_names(self.config)),
        )
        return StepCapabilities((RESULT_ARTIFACT, KEYS_ARTIFACT, MAPPING_ARTIFACT), writes)

    async def run(self, context: StepContext) -> MergeIntoStoreOutput:
        """Read the batch, merge it into the store, write, set the artifacts."""
        objects = context.get_component("stores.objects")
        if not isinstance(objects, ObjectStore):
            raise InputError("component 'stores.objects' is missing or is not an object store")
        llm = context.get_component("models.language") or NoLanguageModel()
        if not isinstance(llm, LanguageModel):
            raise InputError(not_a_language_model(llm))
        embedder = context.get_component("models.embedding") if self.config.semantic_merge else None
        if self.config.semantic_merge and not isinstance(embedder, EmbeddingModel):
            raise InputError(
                "component 'models.embedding' is missing or has no name and embed(texts); "
                "semantic_merge=True needs it (or set semantic_merge=False)"
            )
        keys = required_artifact(context, self.config.relation_keys_artifact)
        if not isinstance(keys, list | tuple):
            raise InputError(f"artifact {self.config.relation_keys_artifact!r} must be a list")
        mapping: Any = None
        if self.config.entity_id_mapping_artifact is not None:
            mapping = required_artifact(context, self.config.entity_id_mapping_artifact)
        async with relation_store(context.get_component(STORE_COMPONENT)) as store:
            output = await self.merge(
                store, objects, list(keys), mapping, llm, embedder, entities_artifact(context)
            )
        context.set_artifact(RESULT_ARTIFACT, output.result)
        context.set_artifact(KEYS_ARTIFACT, output.relation_keys)
        context.set_artifact(MAPPING_ARTIFACT, output.merge.mapping)
        return output

    async def merge(
        self,
        store: RelationStore,
        objects: ObjectStore,
        keys: list[Any],
        mapping: Any,
        llm: LanguageModel,
        embedder: EmbeddingModel | None,
        entities: Any = (),
    ) -> MergeIntoStoreOutput:
        """The step's work once its components and artifacts are known."""
        raws = await read_store_keys(objects, keys)
        merge = StoreMerge(store, self.config, llm, embedder, entities=entities, cache=self.cache)
        merged = await merge.merge(raws, mapping)
        config = self.config
        prefix = config.deduplicated_relations_prefix
        files = [(relation_key(prefix, r.relation_id), r.to_json()) for r in merged.relations]
        await write_files(objects, files)
        logs = {
            config.decisions_key: jsonl(merged.decisions),
            config.clarifications_key: jsonl(merged.clarifications),
            config.rejected_key: jsonl(r.to_dict() for r in merged.rejected),
        }
        log_keys = []
        for name, data in logs.items():
            if name:
                key = f"{config.logs_prefix}/{merged.result.batch_id}/{name}"
                await objects.put(key, data)
                log_keys.append(key)
        return MergeIntoStoreOutput(merged, [key for key, _ in files], log_keys)
