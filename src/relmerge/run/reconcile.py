"""``Reconcile``: re-decide a store's pairs, existing against existing (DESIGN §8).

A merge never decides two stored relations against each other: they were decided when
they came. Reconcile is the explicit exception (after a better model, new guards, or a
store loaded from a graph that was never deduplicated): the store's relations are read
pair by pair, in chunks of blocks as ``run`` works them, through the same kernel
(``stages/chunk.work_chunk``: tiers, guards, the LLM judge with the store's entity
profiles, clarifications, a person's remembered answers), with nothing pinned.

What it gives is a *proposal*, and the store is not changed: a stored id is kept
forever and nothing is deleted, so folding one stored relation into another is a
decision a person takes on reading it. Each cluster of two or more stored relations
proposes one survivor (the one stored first: the oldest id, the one others already
point to) and the absorbed ids that would join it; the survivor's proposed record is
its own with the absorbed ones folded in by the merge's "nothing lost" rule
(``run/fold.folded_into``).

``apply`` (``relmerge reconcile --apply``) writes a proposal as one logged batch of kind
``reconcile``: the survivors updated, each absorbed id mapped to its survivor. Nothing
is deleted: the store keeps the absorbed rows, its reads skip them and resolve their ids
to the survivor, and ``relmerge store undo BATCH`` brings them back. It is refused when a
relation of the proposal changed after it was read (run reconcile again).
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from relmerge.cache import RunCache
from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.features import batch_shared_names
from relmerge.decide.memory import Remembered
from relmerge.errors import StoreError
from relmerge.graphstore.base import ApplyResult, Batch, Pair, RelationStore, relation_pair
from relmerge.model import ExtractedRelation, StepIssue
from relmerge.normalize import normalize_key_text
from relmerge.providers.base import LanguageModel, NoLanguageModel
from relmerge.providers.embedding import EmbeddingModel
from relmerge.providers.stack import build_model_stack
from relmerge.run.fold import folded_into
from relmerge.run.store_vectors import StoreEmbedder
from relmerge.run.writer import final_decision_lines
from relmerge.stages.chunk import ChunkResult, ChunkSettings, ChunkTask, work_chunk

CHUNK_RELATIONS = 5_000  # relations per kernel call: whole blocks, as run chunks them


@dataclass
class ReconcileOutput:
    """The proposal: absorbed id -> surviving id, the survivors' proposed records, the
    decisions and clarifications of the pairs, and the figures."""

    mapping: dict[str, str] = field(default_factory=dict)
    survivors: list[ExtractedRelation] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    clarifications: list[dict[str, Any]] = field(default_factory=list)
    issues: list[StepIssue] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    read: dict[str, ExtractedRelation] = field(default_factory=dict)  # clusters, as read

    def batch_id(self) -> str:
        """``reconcile-`` and a digest of what the proposal writes."""
        digest = hashlib.sha256(orjson.dumps(sorted(self.mapping.items())))
        for survivor in sorted(self.survivors, key=lambda r: r.relation_id):
            digest.update(survivor.to_json() + b"\n")
        return "reconcile-" + digest.hexdigest()[:24]


class Reconcile:
    """Re-decide the pairs of ``store`` (see the module); the arguments are those of
    :class:`~relmerge.run.store_merge.StoreMerge`."""

    def __init__(
        self,
        store: RelationStore,
        config: DeduplicateRelationsConfig | None = None,
        llm: LanguageModel | None = None,
        embedder: EmbeddingModel | None = None,
        *,
        memory: Remembered | None = None,
        cache: RunCache | None = None,
    ) -> None:
        self.store = store
        self.config = config or DeduplicateRelationsConfig()
        self.llm = llm or NoLanguageModel()
        self.embedder = embedder
        self.memory = memory
        self.cache = cache
        if self.config.semantic_merge and embedder is None:
            from relmerge.errors import ConfigError
            from relmerge.run.pipeline import NO_EMBEDDER

            raise ConfigError(NO_EMBEDDER)

    async def _blocks(self) -> tuple[list[list[ExtractedRelation]], Counter[str], int]:
        """The store's blocks of two or more relations (store order), its names' counts
        and its relation count."""
        blocks: dict[Pair, list[ExtractedRelation]] = defaultdict(list)
        names: Counter[str] = Counter()
        total = 0
        async for relation in self.store.dump():
            total += 1
            names[normalize_key_text(relation.name)] += 1
            if relation.source_entity_id != relation.target_entity_id:
                blocks[relation_pair(relation)].append(relation)
        return [members for members in blocks.values() if len(members) > 1], names, total

    async def plan(self) -> dict[str, int]:
        """What a proposal would decide (``--dry-run``): nothing asked, nothing written."""
        multi, _, total = await self._blocks()
        return {
            "stored_relations": total,
            "blocks_to_decide": len(multi),
            "relations_in_blocks": sum(len(m) for m in multi),
            "pairs": sum(len(m) * (len(m) - 1) // 2 for m in multi),
            "largest_block": max((len(m) for m in multi), default=0),
        }

    async def propose(self) -> ReconcileOutput:
        """Read the store's blocks, decide them, and propose; the store is not changed."""
        started = time.perf_counter()
        multi, names, total = await self._blocks()
        ends = sorted(
            {e for m in multi for r in m for e in (r.source_entity_id, r.target_entity_id)}
        )
        entities = await self.store.entities(ends)
        shared = batch_shared_names(names, total, self.config.generic_name_share)
        models = build_model_stack(self.llm, self.config, cache=self.cache)
        embedder = StoreEmbedder(self.embedder, self.store) if self.embedder else None
        settings = ChunkSettings(
            self.config,
            entities,
            self.memory,
            shared,
            semantic=self.config.semantic_merge and embedder is not None,
            report=False,
        )
        output = ReconcileOutput()
        for number, chunk in enumerate(_chunks(multi)):
            task = ChunkTask(number, list(range(len(chunk))), chunk)
            result = await work_chunk(task, settings, models.model, embedder)
            _propose(result, chunk, output)
        if embedder is not None:
            await embedder.save()
        output.figures = {
            "stored_relations": total,
            "blocks_decided": len(multi),
            "relations_in_blocks": sum(len(m) for m in multi),
            "clusters_proposed": len(output.survivors),
            "relations_absorbed": len(output.mapping),
            "clarifications": len(output.clarifications),
            "llm_requests": models.stats.requests,
            "llm_cache_hits": models.stats.cache_hits,
            "seconds": round(time.perf_counter() - started, 3),
        }
        return output

    async def apply(self, output: ReconcileOutput) -> ApplyResult:
        """Write ``output`` (a proposal of this store) as one batch of kind ``reconcile``;
        applied at most once (the same proposal again is ``already_applied``)."""
        batch_id = output.batch_id()
        earlier = await self.store.batch(batch_id)
        if earlier is not None and earlier.status == "applied":
            return ApplyResult("already_applied", batch_id, earlier.counts)
        if not output.mapping:
            return ApplyResult("applied", batch_id)
        pairs = sorted({relation_pair(r) for r in output.survivors})
        states = await self.store.relations_for_pairs(pairs)
        now = {r.relation_id: r for state in states.values() for r in state.relations}
        moved = sorted(i for i, seen in output.read.items() if now.get(i) != seen)
        if moved:
            raise StoreError(
                f"reconcile: {len(moved)} relation(s) of the proposal changed since it was "
                f"read (e.g. {moved[0]!r}); run reconcile again"
            )
        batch = Batch(
            batch_id,
            {pair: state.version for pair, state in states.items()},
            updates=list(output.survivors),
            mapping=dict(output.mapping),
            decisions=list(output.decisions),
            fingerprint=batch_id,
            absorbed=dict(output.mapping),
        )
        applied = await self.store.apply_batch(batch)
        if applied.status == "conflict":
            raise StoreError(
                f"reconcile: {len(applied.conflicts)} pair(s) changed under another batch "
                "meanwhile; run reconcile again"
            )
        return applied


def _chunks(blocks: Sequence[list[ExtractedRelation]]) -> list[list[ExtractedRelation]]:
    """Whole blocks, about ``CHUNK_RELATIONS`` relations a chunk."""
    chunks: list[list[ExtractedRelation]] = [[]]
    for members in blocks:
        if chunks[-1] and len(chunks[-1]) + len(members) > CHUNK_RELATIONS:
            chunks.append([])
        chunks[-1].extend(members)
    return [chunk for chunk in chunks if chunk]


def _propose(result: ChunkResult, chunk: list[ExtractedRelation], output: ReconcileOutput) -> None:
    """The chunk's clusters of two or more stored relations: the first stored survives
    (the kernel keeps input order, which is the store's order)."""
    final_of: dict[str, str] = {}
    for members, _, data in result.outputs:
        ids = [chunk[m].relation_id for m in sorted(members)]
        survivor = ids[0]
        for relation_id in ids:
            final_of[relation_id] = survivor
        if len(ids) < 2:
            continue
        merged = ExtractedRelation.model_construct(**orjson.loads(data))
        output.survivors.append(folded_into(chunk[min(members)], merged))
        output.read.update({chunk[m].relation_id: chunk[m] for m in members})
        output.mapping.update({absorbed: survivor for absorbed in ids[1:]})
    lines = [*result.exact_decisions, *result.semantic_decisions]
    output.decisions.extend(final_decision_lines(lines, final_of))
    output.clarifications.extend(result.clarifications)
    output.issues.extend(result.exact_issues + result.semantic_issues)


__all__ = ["Reconcile", "ReconcileOutput"]
