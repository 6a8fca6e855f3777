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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from relmerge.cache import RunCache
from relmerge.config import DeduplicateRelationsConfig
from relmerge.context import StepContext
from relmerge.engines.base import ChunkEngine
from relmerge.errors import InputError
from relmerge.io.load import entity_from_dict, read_store_keys
from relmerge.model import STEP_NAME, EntityContext
from relmerge.progress import Progress
from relmerge.providers.base import LanguageModel, NoLanguageModel
from relmerge.providers.embedding import EmbeddingModel
from relmerge.providers.preflight import preflight
from relmerge.providers.stack import build_embedder_stack
from relmerge.run.fingerprint import STEP_EXCLUDED, records_fingerprint, run_fingerprint
from relmerge.run.pipeline import run_pipeline
from relmerge.run.result import RunOutput
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
    """``produces``: the artifacts set; ``writes``: every store key the step writes, as
    templates (``{relation_id}``, ``{fingerprint}`` stand for values known when it runs)."""

    produces: tuple[str, ...]
    writes: tuple[str, ...]


def log_names(config: DeduplicateRelationsConfig) -> list[str]:
    """The logs a run writes: decisions, clarifications, rejected records (those not off)."""
    names = (config.decisions_key, config.clarifications_key, config.rejected_key)
    return [name for name in names if name]


class DeduplicateRelations:
    """Deduplicate the relations of the current build batch (ExtractedRelation in and out)."""

    name = STEP_NAME

    def __init__(
        self,
        config: DeduplicateRelationsConfig | None = None,
        cache: RunCache | None = None,
        *,
        preflight: bool = True,
        engine: ChunkEngine | None = None,
    ) -> None:
        """``cache`` (e.g. ``RunCache(Path("relmerge-cache.sqlite"))``) keeps LLM answers and
        embeddings across runs: a re-run of the same batch asks the LLM nothing.

        ``engine`` works the chunks of a batch larger than ``records_per_chunk``
        (default: worker processes on this machine's CPUs where they help, see
        ``engines.local.default_engine``; ``LocalEngine()`` keeps one process,
        ``RayEngine()`` works on Ray).

        With ``preflight`` (the default), a run first sends one minimal request to each
        model endpoint that can be checked (``OpenAICompatibleModel``, ``OpenAIEmbedder``)
        and raises its :class:`~relmerge.errors.ProviderError` before anything is read or
        written when one is not there or is not an LLM."""
        self.config = config or DeduplicateRelationsConfig()
        self.cache = cache
        self.preflight = preflight
        self.engine = engine

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
        return StepCapabilities((RESULT_ARTIFACT, KEYS_ARTIFACT, MAPPING_ARTIFACT), self.writes)

    @property
    def writes(self) -> tuple[str, ...]:
        """Every store key the step writes, as templates: the relation files, then the logs
        under ``{logs_prefix}/{fingerprint}/`` (the run's fingerprint, ``result["fingerprint"]``
        and the first 16 hex digits in the key)."""
        run = f"{self.config.logs_prefix}/{{fingerprint}}"
        return (
            f"{self.config.deduplicated_relations_prefix}/{{relation_id}}.json",
            *(f"{run}/{name}" for name in log_names(self.config)),
        )

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
                heta = " (a heta-framework embedder: see relmerge.integrations.heta)"
                raise InputError(
                    "component 'models.embedding' is missing or has no name and "
                    f"embed(texts){heta if hasattr(embedder, 'model_name') else ''}; "
                    "semantic_merge=True needs it (or set semantic_merge=False)"
                )
        if not isinstance(llm, LanguageModel):
            raise InputError(not_a_language_model(llm))
        keys = required_artifact(context, self.config.relation_keys_artifact)
        mapping: Any = None
        if self.config.entity_id_mapping_artifact is not None:
            mapping = required_artifact(context, self.config.entity_id_mapping_artifact)
        output = await self.deduplicate(
            store, keys, mapping, llm, embedder, entities_artifact(context), progress
        )
        context.set_artifact(RESULT_ARTIFACT, output.result)  # its JSON object
        context.set_artifact(KEYS_ARTIFACT, output.relation_keys)
        context.set_artifact(MAPPING_ARTIFACT, output.relation_id_mapping)
        return output

    async def deduplicate(
        self,
        store: ObjectStore,
        keys: Any,
        mapping: Any,
        llm: LanguageModel,
        embedder: EmbeddingModel | None = None,
        entities: Sequence[EntityContext] = (),
        progress: Progress | None = None,
    ) -> RunOutput:
        """The step's work once its components and artifacts are known: read ``keys``,
        deduplicate, write the relation files and, under a prefix naming the run, the logs.

        The result gains ``fingerprint`` (see ``run.fingerprint``) and ``log_keys`` (the
        logs' keys, as written).
        """
        if not isinstance(keys, list | tuple):
            raise InputError(f"artifact {self.config.relation_keys_artifact!r} must be a list")
        checked = 0
        if self.preflight:  # before anything is read or written
            checked = await preflight(llm)
            if embedder is not None:
                checked += await preflight(embedder)
        raws = await read_store_keys(store, list(keys))
        fingerprint = run_fingerprint(
            records_fingerprint(raws),
            mapping=mapping,
            config=self.config,
            models=[llm.name, embedder.name if embedder is not None else None],
            entities=entities,
            excluded=STEP_EXCLUDED,
        )
        if embedder is not None and self.cache is not None:
            embedder = build_embedder_stack(embedder, self.cache)
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
            engine=self.engine,
            log_prefix=f"{self.config.logs_prefix}/{fingerprint[:16]}",
            preflight_requests=checked,
        )
        output.summary = output.summary.with_run(fingerprint, output.log_keys)
        return output


def entities_artifact(context: StepContext) -> list[EntityContext]:
    """The optional ``entities`` artifact: a list of {entity_id, name, type, profile}."""
    try:
        raw = context.get_artifact(ENTITIES_ARTIFACT)
    except KeyError:
        return []
    if raw is None:
        return []
    if not isinstance(raw, list | tuple):
        raise InputError(f"artifact {ENTITIES_ARTIFACT!r} must be a list of entities")
    return [entity_from_dict(item, f"entities[{i}]") for i, item in enumerate(raw)]


def required_artifact(context: StepContext, key: str) -> Any:
    """An artifact the step needs, or a one-line :class:`InputError` naming it."""
    try:
        return context.get_artifact(key)
    except KeyError:
        hint = " (or set entity_id_mapping_artifact=None)" if "mapping" in key else ""
        raise InputError(f"the context has no artifact {key!r}{hint}") from None


def not_a_language_model(component: object) -> str:
    """Why ``component`` cannot be the language model, and what to do about it."""
    if callable(getattr(component, "invoke", None)) and hasattr(component, "model_name"):
        return (
            "component 'models.language' looks like a heta-framework model (invoke takes a "
            "ModelRequest): in a heta-framework recipe use "
            "relmerge.integrations.heta.DeduplicateRelations (pip install 'relmerge[heta]'), "
            "which adapts it"
        )
    return (
        "component 'models.language' is not a relmerge language model (a name, an "
        "available flag and async invoke(LLMRequest) -> LLMResult); "
        f"got {type(component).__name__}"
    )
