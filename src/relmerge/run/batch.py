"""One batch run into OUT, as ``relmerge run`` makes it: endpoints checked, OUT claimed by
the run's fingerprint, outputs and the manifest written, answers given in OUT applied.

The command line (``cli.run``) and the passes over a framework's graph
(``integrations.lightrag``) both run a batch this way, so an OUT they write is one that
``relmerge review`` and a second run of the same command understand.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relmerge.cache import CACHE_FILE, RunCache
from relmerge.config import DeduplicateRelationsConfig, EmbeddingSettings, LLMSettings
from relmerge.engines.base import ChunkEngine
from relmerge.io.load import read_entities, read_entity_mapping, stream_input
from relmerge.io.outdir import Fingerprint, claim_output, remove_stale_relations
from relmerge.io.records import Rejected
from relmerge.io.write import write_manifest
from relmerge.progress import Progress
from relmerge.providers import preflight
from relmerge.providers.base import LanguageModel, NoLanguageModel
from relmerge.providers.cached import model_identity
from relmerge.providers.embedding import EmbeddingModel
from relmerge.providers.stack import get_embedder, get_llm
from relmerge.review.memory import AnswerMemory
from relmerge.review.queue import run_memory
from relmerge.run.fingerprint import OPERATIONAL, run_fingerprint
from relmerge.run.pipeline import run_pipeline
from relmerge.run.result import RunResult
from relmerge.stores.base import ObjectStore


def answer_memory(out: Path) -> AnswerMemory:
    """Answers a person gave in OUT (``relmerge review``), kept across runs.

    ``answer_memory.jsonl`` keeps every answer by pair content, so an answer still applies
    after the run that asked it has been replaced by newer runs; it follows
    ``answers.jsonl`` (revised and forgotten answers included: ``review.queue``).
    """
    return run_memory(out)


@dataclass(frozen=True)
class RunRequest:
    """Where a run reads and writes, and how it treats OUT (from the command line)."""

    input_path: str
    out: str
    out_dir: Path | None  # OUT as a local directory; None for an object-store URL
    storage_options: dict[str, Any]
    entity_mapping: Path | None
    entities_path: Path | None
    overwrite: bool
    preflight: bool
    command: dict[str, Any] | None  # the command line recorded for `relmerge review`


@dataclass(frozen=True)
class Models:
    """The run's providers (the registry's, from the settings), and how the fingerprint
    names them."""

    llm: LanguageModel
    embedder: EmbeddingModel | None
    named: list[Any]
    prices: tuple[float | None, float | None] = (None, None)  # USD per million in / out


def models_for(
    llm: LanguageModel | LLMSettings | None,
    embedding: EmbeddingModel | EmbeddingSettings | None,
    config: DeduplicateRelationsConfig,
    cache: RunCache | None,
) -> Models:
    """The models of a run started from Python (a framework's pass): settings opened as
    ``relmerge run`` opens them, or models given as they are (default: rules only, and
    relmerge's offline embedder); named for the fingerprint as the CLI names them."""
    named: list[Any] = []
    if isinstance(llm, LLMSettings):
        named.append(llm.model_dump(mode="json", exclude=set(OPERATIONAL)))
        model: LanguageModel = get_llm(llm)
    else:
        model = llm or NoLanguageModel()
        named.append(model_identity(model))
    embedder: EmbeddingModel | None = None
    if config.semantic_merge:
        if isinstance(embedding, EmbeddingSettings) or embedding is None:
            settings = embedding or EmbeddingSettings()
            named.append(settings.model_dump(mode="json", exclude=set(OPERATIONAL)))
            embedder = get_embedder(settings, cache)
        else:
            named.append(getattr(embedding, "name", type(embedding).__name__))
            embedder = embedding
    return Models(model, embedder, named)


def open_cache(cache: RunCache | bool | None, out: Path) -> RunCache | None:
    """``True``: the run cache in ``OUT/.relmerge/cache.sqlite``; a cache as given; or none."""
    if cache is True:
        return RunCache(out / CACHE_FILE)
    return cache or None


async def run_into_out(
    request: RunRequest,
    store: ObjectStore,
    config: DeduplicateRelationsConfig,
    models: Models,
    cache: RunCache | None,
    engine: ChunkEngine | None,
    progress: Progress,
    pinned: frozenset[str] = frozenset(),
) -> tuple[RunResult, list[Rejected]]:
    """The run: endpoints checked, input streamed, OUT claimed (by its fingerprint) once
    the input is known to be usable, outputs written, stale relation files removed, and
    the result file last (until it exists, OUT is an incomplete run to resume)."""
    # The endpoints first: a dead or wrong one stops the run before anything is read.
    checked = 0
    if request.preflight:
        checked = await preflight(models.llm)
        if models.embedder is not None:
            checked += await preflight(models.embedder)
    entities = read_entities(request.entities_path) if request.entities_path else []
    records = await stream_input(request.input_path, request.storage_options)
    mapping = read_entity_mapping(request.entity_mapping) if request.entity_mapping else None
    hashed = Fingerprint()  # of the records as they stream by, complete when OUT is claimed
    memory = answer_memory(request.out_dir) if request.out_dir is not None else None
    fingerprint = ""

    async def claim() -> None:
        nonlocal fingerprint
        fingerprint = run_fingerprint(
            hashed,
            mapping=mapping,
            config=config,
            models=[*models.named, *([{"pinned": sorted(pinned)}] if pinned else [])],
            entities=entities,
        )
        await claim_output(store, fingerprint, request.overwrite, request.command)

    output = await run_pipeline(
        hashed.records(records),
        mapping,
        config,
        models.llm,
        store,
        progress,
        models.embedder,
        entities,
        memory,
        before_work=claim,
        cache=cache,
        engine=engine,
        preflight_requests=checked,
        pinned=pinned,
    )
    result = output.summary.with_run(fingerprint).with_prices(*models.prices)
    await remove_stale_relations(store, config.deduplicated_relations_prefix, output.relation_keys)
    await write_manifest(store, result.to_dict(), output.relation_keys, output.relation_id_mapping)
    return result, output.rejected
