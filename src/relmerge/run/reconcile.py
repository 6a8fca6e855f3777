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

``pending`` (``relmerge reconcile --pending``) reads only the pairs that batches changed
since the last applied reconcile, and the pairs it left open: merge each batch with rules
only (``merge-into --llm none``), then one pending reconcile with the LLM asks about each
touched block once, however many batches brought its records; its cost follows what
changed, not the store. Every applied reconcile records the newest batch it covered (a
``reconciled_through`` decision line; a proposal with nothing to absorb is applied as
that line alone), so the next pending one starts there.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from relmerge.cache import RunCache
from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.features import batch_shared_names
from relmerge.decide.memory import Remembered
from relmerge.errors import StoreError
from relmerge.graphstore.base import ApplyResult, Batch, Pair, RelationStore, relation_pair
from relmerge.graphstore.reads import RECONCILED
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
    since: int = 0  # the newest batch the last applied reconcile covered
    through: int = 0  # the newest applied batch when this one read the store
    open_pairs: list[Pair] = field(default_factory=list)  # pairs left with clarifications

    @property
    def changes_store(self) -> bool:
        """Applying writes something: relations to absorb, or batches newly covered."""
        return bool(self.mapping) or self.through > self.since

    def coverage_line(self) -> dict[str, Any]:
        """The decision line that tells the next pending reconcile where to start."""
        return {RECONCILED: self.through, "open_pairs": [list(p) for p in self.open_pairs]}

    def batch_id(self) -> str:
        """``reconcile-`` and a digest of what the proposal writes."""
        digest = hashlib.sha256(orjson.dumps(sorted(self.mapping.items())))
        digest.update(orjson.dumps(self.coverage_line()))
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
        pending: bool = False,
    ) -> None:
        self.store = store
        self.pending = pending
        self.config = config or DeduplicateRelationsConfig()
        self.llm = llm or NoLanguageModel()
        self.embedder = embedder
        self.memory = memory
        self.cache = cache
        if self.config.semantic_merge and embedder is None:
            from relmerge.errors import ConfigError
            from relmerge.run.pipeline import NO_EMBEDDER

            raise ConfigError(NO_EMBEDDER)

    async def _blocks(self) -> _Scope:
        """The blocks of two or more relations to decide (store order), the names'
        counts and the relations read: the whole store, or (``pending``) the pairs
        changed since the last applied reconcile."""
        changes = await self.store.changes_since_reconcile()
        scope = _Scope(since=changes.since, through=changes.through)
        if self.pending:
            states = await self.store.relations_for_pairs(list(changes.pairs))
            relations = (r for state in states.values() for r in state.relations)
            scope.add_all(relations)
        else:
            async for relation in self.store.dump():
                scope.add(relation)
        return scope

    def _scope_words(self, scope: _Scope) -> dict[str, str]:
        """What ``--pending`` read, in words: right after a load (no reconcile yet) it is
        every loaded pair, which a user reading "pending" would not expect."""
        if not self.pending:
            return {}
        if scope.since == 0:
            return {
                "pending": "every pair a batch wrote (no reconcile yet: a loaded store "
                "is read whole once)"
            }
        return {
            "pending": f"the pairs batches wrote after batch {scope.since} (the last "
            "reconcile's) and the pairs it left open"
        }

    async def plan(self) -> dict[str, int | str]:
        """What a proposal would decide (``--dry-run``): nothing asked, nothing written."""
        scope = await self._blocks()
        multi, total = scope.multi(), scope.total
        return {
            **self._scope_words(scope),
            ("relations_read" if self.pending else "stored_relations"): total,
            "blocks_to_decide": len(multi),
            "relations_in_blocks": sum(len(m) for m in multi),
            "pairs": sum(len(m) * (len(m) - 1) // 2 for m in multi),
            "largest_block": max((len(m) for m in multi), default=0),
        }

    async def propose(self) -> ReconcileOutput:
        """Read the store's blocks, decide them, and propose; the store is not changed."""
        started = time.perf_counter()
        scope = await self._blocks()
        multi, names, total = scope.multi(), scope.names, scope.total
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
        output = ReconcileOutput(since=scope.since, through=scope.through)
        for number, chunk in enumerate(_chunks(multi)):
            task = ChunkTask(number, list(range(len(chunk))), chunk)
            result = await work_chunk(task, settings, models.model, embedder)
            _propose(result, chunk, output)
        if embedder is not None:
            await embedder.save()
        output.figures = {
            **self._scope_words(scope),
            ("relations_read" if self.pending else "stored_relations"): total,
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
        if not output.changes_store:
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
            decisions=[*output.decisions, output.coverage_line()],
            fingerprint=batch_id,
            absorbed=dict(output.mapping),
            reconcile=True,
        )
        applied = await self.store.apply_batch(batch)
        if applied.status == "conflict":
            raise StoreError(
                f"reconcile: {len(applied.conflicts)} pair(s) changed under another batch "
                "meanwhile; run reconcile again"
            )
        return applied


@dataclass
class _Scope:
    """What a reconcile reads: relations by pair, their names' counts, and the batches
    it covers."""

    since: int
    through: int
    blocks: dict[Pair, list[ExtractedRelation]] = field(default_factory=lambda: defaultdict(list))
    names: Counter[str] = field(default_factory=Counter)
    total: int = 0

    def add(self, relation: ExtractedRelation) -> None:
        self.total += 1
        self.names[normalize_key_text(relation.name)] += 1
        if relation.source_entity_id != relation.target_entity_id:
            self.blocks[relation_pair(relation)].append(relation)

    def add_all(self, relations: Iterable[ExtractedRelation]) -> None:
        for relation in relations:
            self.add(relation)

    def multi(self) -> list[list[ExtractedRelation]]:
        return [members for members in self.blocks.values() if len(members) > 1]


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
    pair_of_id = {relation.relation_id: relation_pair(relation) for relation in chunk}
    for item in result.clarifications:
        for member in item.get("member_ids", []):
            if member in pair_of_id and pair_of_id[member] not in output.open_pairs:
                output.open_pairs.append(pair_of_id[member])
                break
    output.issues.extend(result.exact_issues + result.semantic_issues)


__all__ = ["Reconcile", "ReconcileOutput"]
