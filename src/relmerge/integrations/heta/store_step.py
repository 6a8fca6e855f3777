"""``MergeIntoStore`` for heta-framework recipes: the store merge (``relmerge.run.store_step``)
behind heta's step protocol, so that each build fuses its batch into the graph the last
builds stored (seed 001's "store merge step").

The relation store is a store component of the recipe, named by ``relation_store``
(default ``relations``): ``KnowledgeStores(objects=…, named={"relations": URL})``, the URL
``sqlite:///PATH`` or ``postgresql://…`` (or an open relmerge relation store); or, without
a component, ``relation_store_url`` in the config. The batch, models and artifacts are
those of the ``DeduplicateRelations`` step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from heta_framework.kb.cleanup import StepCleanupPlan, object_key_targets
from heta_framework.kb.steps import (
    ComponentRef,
    StepContextProtocol,
    StepIssue,
    StepRequirements,
    model_ref,
    store_ref,
)
from pydantic import Field

from relmerge.integrations.heta.config import DeduplicateRelationsConfig
from relmerge.integrations.heta.models import embedding_model, language_model
from relmerge.integrations.heta.result import heta_issue, rejected_issue, rejected_log_key
from relmerge.integrations.heta.step import LOG_KEYS_ARTIFACT, StepCapabilities
from relmerge.integrations.heta.store import object_store
from relmerge.run.step import MAPPING_ARTIFACT, RESULT_ARTIFACT, entities_artifact
from relmerge.run.step import required_artifact as _required
from relmerge.run.store_step import STEP_NAME, MergeIntoStoreOutput, relation_store
from relmerge.run.store_step import MergeIntoStore as CoreStep


class MergeIntoStoreConfig(DeduplicateRelationsConfig):
    """The ``DeduplicateRelations`` step's configuration, plus where the store is."""

    relation_store: str = Field(
        "relations",
        description="Named store component of the recipe holding the relation store "
        "(a URL or an open store): KnowledgeStores(named={NAME: URL}).",
    )
    relation_store_url: str | None = Field(
        None, description="The relation store's URL; when set, no store component is needed."
    )


@dataclass(frozen=True)
class MergeIntoStoreResult:
    """What the merge did (``details``: relmerge's whole store-merge result), with the
    issues as heta-framework ``StepIssue``\\ s for the build report."""

    relation_keys: tuple[str, ...]
    batch_id: str
    status: str
    inserted_count: int
    joined_count: int
    issues: tuple[StepIssue, ...]
    log_keys: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_output(cls, output: MergeIntoStoreOutput, rejected_log: str | None) -> Any:
        merged = output.merge
        issues = [heta_issue(issue) for issue in merged.issues]
        issues += [rejected_issue(item, rejected_log) for item in merged.rejected]
        return cls(
            relation_keys=tuple(output.relation_keys),
            batch_id=merged.result.batch_id,
            status=merged.result.status,
            inserted_count=merged.result.inserted_count,
            joined_count=merged.result.joined_count,
            issues=tuple(issues),
            log_keys=tuple(output.log_keys),
            details=output.result,
        )


class MergeIntoStore:
    """Merge the relations of the current build batch into a relation store.

    >>> step = MergeIntoStore(MergeIntoStoreConfig(semantic_merge=False))
    >>> sorted(ref.key for ref in step.requirements.components)
    ['models.language', 'stores.objects', 'stores.relations.relations']
    """

    name = STEP_NAME

    def __init__(self, config: MergeIntoStoreConfig | None = None, cache: Any = None) -> None:
        self.config = config or MergeIntoStoreConfig()
        self._core = CoreStep(self.config, cache)

    @property
    def _refs(self) -> dict[str, ComponentRef]:
        config = self.config
        refs = {
            "objects": store_ref("objects", config.object_store),
            "language": model_ref("language", config.language_model),
        }
        if config.relation_store_url is None:
            refs["relations"] = store_ref("relations", config.relation_store)
        if config.semantic_merge:
            refs["embedding"] = model_ref("embedding", config.embedding_model)
        return refs

    @property
    def requirements(self) -> StepRequirements:
        artifacts = {self.config.relation_keys_artifact}
        if self.config.entity_id_mapping_artifact is not None:
            artifacts.add(self.config.entity_id_mapping_artifact)
        return StepRequirements(
            components=frozenset(self._refs.values()), artifacts=frozenset(artifacts)
        )

    @property
    def capabilities(self) -> StepCapabilities:
        artifacts = {
            RESULT_ARTIFACT,
            self.config.deduplicated_relation_keys_artifact,
            MAPPING_ARTIFACT,
            LOG_KEYS_ARTIFACT,
        }
        return StepCapabilities(
            artifacts=frozenset(artifacts), writes=self._core.capabilities.writes
        )

    def cleanup_plan(self, artifacts: Mapping[str, Any]) -> StepCleanupPlan:
        """The objects this step wrote (relation files, logs); the store's batch is undone
        with ``relmerge store undo URL BATCH_ID``, never by a cleanup."""
        component = self._refs["objects"].key
        keys = self.config.deduplicated_relation_keys_artifact
        return StepCleanupPlan(
            object_key_targets(artifacts, keys, component=component)
            + object_key_targets(artifacts, LOG_KEYS_ARTIFACT, component=component)
        )

    async def run(self, context: StepContextProtocol) -> None:
        """Read the listed relations, merge them into the store, write, set artifacts."""
        config, refs = self.config, self._refs
        objects = object_store(context.get_component(refs["objects"].key), refs["objects"].key)
        llm = language_model(
            context.get_component(refs["language"].key),
            refs["language"].key,
            config.response_format,
        )
        embedder = None
        if config.semantic_merge:
            key = refs["embedding"].key
            embedder = embedding_model(context.get_component(key), key)
        keys = _required(context, config.relation_keys_artifact)
        mapping = None
        if config.entity_id_mapping_artifact is not None:
            mapping = _required(context, config.entity_id_mapping_artifact)
        where: Any = config.relation_store_url
        if where is None:
            where = context.get_component(refs["relations"].key)
        async with relation_store(where) as store:
            output = await self._core.merge(
                store, objects, list(keys), mapping, llm, embedder, entities_artifact(context)
            )
        rejected_log = rejected_log_key(output.log_keys, config.rejected_key)
        context.set_artifact(
            RESULT_ARTIFACT, MergeIntoStoreResult.from_output(output, rejected_log)
        )
        context.set_artifact(
            config.deduplicated_relation_keys_artifact, tuple(output.relation_keys)
        )
        context.set_artifact(MAPPING_ARTIFACT, output.merge.mapping)
        context.set_artifact(LOG_KEYS_ARTIFACT, tuple(output.log_keys))
