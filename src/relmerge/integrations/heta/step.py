"""``DeduplicateRelations`` for heta-framework recipes: relmerge's step behind heta's step
protocol (``KnowledgeStepProtocol``).

It reads and writes what heta-framework's own step does (the same artifacts, the same
relation files under ``deduplicated_relations_prefix``), plus the run's logs under
``logs_prefix/<fingerprint>/``, whose keys it sets as the ``deduplicate_relations_log_keys``
artifact so that ``cleanup_plan`` can remove them too, even from a record loaded later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from heta_framework.kb.cleanup import StepCleanupPlan, object_key_targets
from heta_framework.kb.steps import (
    ComponentRef,
    StepContextProtocol,
    StepRequirements,
    model_ref,
    store_ref,
)
from heta_framework.kb.steps import StepCapabilities as HetaCapabilities

from relmerge.cache import RunCache
from relmerge.integrations.heta.config import DeduplicateRelationsConfig
from relmerge.integrations.heta.models import embedding_model, language_model
from relmerge.integrations.heta.result import DeduplicateRelationsResult, rejected_log_key
from relmerge.integrations.heta.store import object_store
from relmerge.model import STEP_NAME
from relmerge.run.step import (
    MAPPING_ARTIFACT,
    RESULT_ARTIFACT,
    entities_artifact,
    required_artifact,
)
from relmerge.run.step import DeduplicateRelations as CoreStep

LOG_KEYS_ARTIFACT = "deduplicate_relations_log_keys"


@dataclass(frozen=True)
class StepCapabilities(HetaCapabilities):
    """heta-framework's capabilities (the artifacts), and every store key the step writes,
    as templates (``{relation_id}``, ``{fingerprint}``)."""

    writes: tuple[str, ...] = ()


class DeduplicateRelations:
    """Deduplicate the relations of the current build batch: a drop-in replacement of
    ``heta_framework.kb.steps.DeduplicateRelations``.

    >>> step = DeduplicateRelations(DeduplicateRelationsConfig(semantic_merge=False))
    >>> sorted(ref.key for ref in step.requirements.components)
    ['models.language', 'stores.objects']
    """

    name = STEP_NAME

    def __init__(
        self, config: DeduplicateRelationsConfig | None = None, cache: RunCache | None = None
    ) -> None:
        """``cache`` (a :class:`~relmerge.RunCache`) keeps LLM answers and embeddings
        across builds: a rebuild of the same batch asks the LLM nothing."""
        self.config = config or DeduplicateRelationsConfig()
        self._core = CoreStep(self.config, cache)

    @property
    def _store(self) -> ComponentRef:
        return store_ref("objects", self.config.object_store)

    @property
    def _language(self) -> ComponentRef:
        return model_ref("language", self.config.language_model)

    @property
    def _embedding(self) -> ComponentRef:
        return model_ref("embedding", self.config.embedding_model)

    @property
    def requirements(self) -> StepRequirements:
        components = {self._store, self._language}
        if self.config.semantic_merge:
            components.add(self._embedding)
        artifacts = {self.config.relation_keys_artifact}
        if self.config.entity_id_mapping_artifact is not None:
            artifacts.add(self.config.entity_id_mapping_artifact)
        return StepRequirements(components=frozenset(components), artifacts=frozenset(artifacts))

    @property
    def capabilities(self) -> StepCapabilities:
        artifacts = {
            RESULT_ARTIFACT,
            self.config.deduplicated_relation_keys_artifact,
            MAPPING_ARTIFACT,
            LOG_KEYS_ARTIFACT,
        }
        return StepCapabilities(artifacts=frozenset(artifacts), writes=self._core.writes)

    def cleanup_plan(self, artifacts: Mapping[str, Any]) -> StepCleanupPlan:
        """The objects this step wrote: its relation files and its logs."""
        component = self._store.key
        return StepCleanupPlan(
            object_key_targets(
                artifacts, self.config.deduplicated_relation_keys_artifact, component=component
            )
            + object_key_targets(artifacts, LOG_KEYS_ARTIFACT, component=component)
        )

    async def run(self, context: StepContextProtocol) -> None:
        """Read the listed relations (+ entity mapping), deduplicate, write, set artifacts."""
        config = self.config
        store = object_store(context.get_component(self._store.key), self._store.key)
        llm = language_model(
            context.get_component(self._language.key), self._language.key, config.response_format
        )
        embedder = None
        if config.semantic_merge:
            embedder = embedding_model(
                context.get_component(self._embedding.key), self._embedding.key
            )
        keys = required_artifact(context, config.relation_keys_artifact)
        mapping: Any = None
        if config.entity_id_mapping_artifact is not None:
            mapping = required_artifact(context, config.entity_id_mapping_artifact)
        output = await self._core.deduplicate(
            store, keys, mapping, llm, embedder, entities_artifact(context)
        )
        rejected_log = rejected_log_key(output.log_keys, config.rejected_key)
        context.set_artifact(
            RESULT_ARTIFACT, DeduplicateRelationsResult.from_output(output, rejected_log)
        )
        context.set_artifact(
            config.deduplicated_relation_keys_artifact, tuple(output.relation_keys)
        )
        context.set_artifact(MAPPING_ARTIFACT, output.relation_id_mapping)
        context.set_artifact(LOG_KEYS_ARTIFACT, tuple(output.log_keys))
