"""``DeduplicateRelations``: the step contract of seed 001 over the pipeline.

>>> import asyncio
>>> from relmerge import DeduplicateRelations, DeduplicateRelationsConfig
>>> from relmerge.context import DictContext
>>> from relmerge.stores import MemoryStore
>>> step = DeduplicateRelations(DeduplicateRelationsConfig(semantic_merge=False))
>>> ctx = DictContext({"stores.objects": MemoryStore()}, {"relation_keys": []})
>>> step.requirements.components
('stores.objects', 'models.language')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relmerge.cache import RunCache
from relmerge.config import DeduplicateRelationsConfig
from relmerge.context import StepContext
from relmerge.errors import InputError
from relmerge.io.load import entity_from_dict, read_store_keys
from relmerge.model import STEP_NAME
from relmerge.pipeline import RunOutput, run_pipeline
from relmerge.progress import Progress
from relmerge.prompts.context import EntityContext
from relmerge.providers.base import LanguageModel, NoLanguageModel
from relmerge.providers.cached import PersistentEmbedder
from relmerge.providers.embedding import CachedEmbedder, EmbeddingModel
from relmerge.providers.preflight import preflight
from relmerge.stores.base import ObjectStore

RESULT_ARTIFACT = "deduplicate_relations_result"
KEYS_ARTIFACT = "deduplicated_relation_keys"
MAPPING_ARTIFACT = "relation_id_mapping"
ENTITIES_ARTIFACT = "entities"


@dataclass(frozen=True)
class StepRequirements:
    components: tuple[str, ...]
    artifacts: tuple[str, ...]


@dataclass(frozen=True)
class StepCapabilities:
    produces: tuple[str, ...]
    writes: tuple[str, ...]


class DeduplicateRelations:
    """Deduplicate the relations of the current build batch (ExtractedRelation in and out)."""

    name = STEP_NAME

    def __init__(
        self,
        config: DeduplicateRelationsConfig | None = None,
        cache: RunCache | None = None,
        *,
        preflight: bool = True,
    ) -> None:
        """``cache`` (e.g. ``RunCache(Path("relmerge-cache.sqlite"))``) keeps LLM answers and
        embeddings across runs: a re-run of the same batch asks the LLM nothing.

        With ``preflight`` (the default), :meth:`run` first sends one minimal request to
        each model endpoint that can be checked (``OpenAICompatibleModel``,
        ``OpenAIEmbedder``) and raises its :class:`~relmerge.errors.ProviderError` before
        anything is read or written when one is not there or is not an LLM."""
        self.config = config or DeduplicateRelationsConfig()
        self.cache = cache
        self.preflight = preflight

    @property
    def requirements(self) -> StepRequirements:
        components = ["stores.objects", "models.language"]
        if self.config.semantic_merge:
            components.append("models.embedding")
        artifacts = [self.config.relation_keys_artifact]
        if self.config.entity_id_mapping_artifact is not None:
            artifacts.append(self.config.entity_id_mapping_artifact)
        return StepRequirements(tuple(components), tuple(artifacts))

    @property
    def capabilities(self) -> StepCapabilities:
        writes = [f"{self.config.deduplicated_relations_prefix}/{{relation_id}}.json"]
        writes += [key for key in (self.config.decisions_key, self.config.rejected_key) if key]
        return StepCapabilities((RESULT_ARTIFACT, KEYS_ARTIFACT, MAPPING_ARTIFACT), tuple(writes))

    async def run(self, context: StepContext, progress: Progress | None = None) -> RunOutput:
        """Read ``relation_keys`` (+ entity mapping), deduplicate, write, set artifacts.

        An endpoint that stops answering mid-run does not raise: the groups it left keep
        their records, with the issue ``llm_unavailable`` in the result (counted in
        ``llm_unavailable_group_count``); running the step again asks them."""
        store = context.get_component("stores.objects")
        if not isinstance(store, ObjectStore):
            raise InputError("component 'stores.objects' is missing or is not an object store")
        llm = context.get_component("models.language") or NoLanguageModel()
        embedder = None
        if self.config.semantic_merge:
            embedder = context.get_component("models.embedding")
            if not isinstance(embedder, EmbeddingModel):
                raise InputError(
                    "component 'models.embedding' is missing or has no embed(texts); "
                    "semantic_merge=True needs it (or set semantic_merge=False)"
                )
        if not isinstance(llm, LanguageModel):
            raise InputError("component 'models.language' does not implement invoke(request)")
        checked = 0
        if self.preflight:  # before anything is read or written
            checked = await preflight(llm)
            if embedder is not None:
                checked += await preflight(embedder)
        keys = self._artifact(context, self.config.relation_keys_artifact)
        if not isinstance(keys, list | tuple):
            raise InputError(f"artifact {self.config.relation_keys_artifact!r} must be a list")
        mapping: Any = None
        if self.config.entity_id_mapping_artifact is not None:
            mapping = self._artifact(context, self.config.entity_id_mapping_artifact)
        entities = self._entities(context)
        raws = await read_store_keys(store, list(keys))
        if embedder is not None and self.cache is not None:
            embedder = CachedEmbedder(PersistentEmbedder(embedder, self.cache))
        output = await run_pipeline(
            raws,
            mapping,
            self.config,
            llm,
            store,
            progress,
            embedder,
            entities,
            cache=self.cache,
            preflight_requests=checked,
        )
        context.set_artifact(RESULT_ARTIFACT, output.result)
        context.set_artifact(KEYS_ARTIFACT, output.relation_keys)
        context.set_artifact(MAPPING_ARTIFACT, output.relation_id_mapping)
        return output

    @staticmethod
    def _entities(context: StepContext) -> list[EntityContext]:
        """Optional ``entities`` artifact: a list of {entity_id, name, type, profile}."""
        try:
            raw = context.get_artifact(ENTITIES_ARTIFACT)
        except KeyError:
            return []
        if raw is None:
            return []
        if not isinstance(raw, list | tuple):
            raise InputError(f"artifact {ENTITIES_ARTIFACT!r} must be a list of entities")
        return [entity_from_dict(item, f"entities[{i}]") for i, item in enumerate(raw)]

    @staticmethod
    def _artifact(context: StepContext, key: str) -> Any:
        try:
            return context.get_artifact(key)
        except KeyError:
            hint = " (or set entity_id_mapping_artifact=None)" if "mapping" in key else ""
            raise InputError(f"the context has no artifact {key!r}{hint}") from None
