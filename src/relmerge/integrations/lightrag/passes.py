"""A deduplication pass over a LightRAG instance, through its own API, and its undo.

The pass reads the edges (all, or those given documents contributed: ``graph``), turns
each edge's ``<SEP>`` fragments into records (``records``), runs them into OUT as
``relmerge run`` does (``run.batch``: the same kernel, options, cache, canaries, review
answers), journals every edge it will change (``journal``), then writes each one back
through LightRAG (``edits``). OUT is then a run that ``relmerge review`` reads; running the
same pass again applies the answers. Undo takes the journalled passes back, newest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from relmerge.adapters.common import (
    ENTITIES_FILE,
    RELATIONS_FILE,
    jsonl_bytes,
    read_run,
    write_atomic,
)
from relmerge.cache import RunCache
from relmerge.config import DeduplicateRelationsConfig, EmbeddingSettings, LLMSettings
from relmerge.errors import InputError
from relmerge.integrations.lightrag import graph, journal, settled
from relmerge.integrations.lightrag.edits import BATCH, EdgeWriter, current_edge, reembed_call
from relmerge.integrations.lightrag.fields import edit_fields, rebase, same
from relmerge.integrations.lightrag.records import edge_records
from relmerge.integrations.lightrag.rewrite import edge_fragments, new_descriptions
from relmerge.progress import Progress, as_progress
from relmerge.providers.base import LanguageModel
from relmerge.providers.embedding import EmbeddingModel
from relmerge.run.batch import RunRequest, models_for, open_cache, run_into_out
from relmerge.run.result import RunResult
from relmerge.stores import open_store

STALE_FILE = "stale.json"


@dataclass
class LightragPass:
    """What a pass did: edges read and changed, fragments before and after, the run it
    made (``run``: None for a resumed pass), and what it could not do."""

    out: Path
    edges_read: int = 0
    edges_changed: int = 0
    fragments_before: int = 0
    fragments_after: int = 0
    run: RunResult | None = None
    resumed: bool = False
    fragments_settled: int = 0  # decided by an earlier pass: not judged against each other
    documents: list[str] = field(default_factory=list)
    waiting_documents: list[str] = field(default_factory=list)
    failed_documents: list[str] = field(default_factory=list)
    unknown_documents: list[str] = field(default_factory=list)
    gone_edges: list[tuple[str, str]] = field(default_factory=list)  # deleted meanwhile
    stale_edges: list[tuple[str, str]] = field(default_factory=list)  # vectors not rebuilt

    def summary(self) -> dict[str, Any]:
        return {
            "edges_read": self.edges_read,
            "edges_changed": self.edges_changed,
            "fragments_before": self.fragments_before,
            "fragments_after": self.fragments_after,
            "resumed": self.resumed,
            "fragments_settled": self.fragments_settled,
            "documents": self.documents,
            "waiting_documents": self.waiting_documents,
            "failed_documents": self.failed_documents,
            "unknown_documents": self.unknown_documents,
            "gone_edges": [list(pair) for pair in self.gone_edges],
            "stale_edges": [list(pair) for pair in self.stale_edges],
        }


@dataclass
class UndoResult:
    """What an undo restored: edges exactly as they were, edges rebased (LightRAG added to
    them since the pass: what it added is kept), and edges deleted since."""

    passes: int = 0
    restored: int = 0
    rebased: int = 0
    gone_edges: list[tuple[str, str]] = field(default_factory=list)
    stale_edges: list[tuple[str, str]] = field(default_factory=list)


async def _documents(
    rag: Any, documents: Sequence[str] | None, track_id: str | None, wait_seconds: float
) -> tuple[list[tuple[str, str]] | None, graph.Documents]:
    """The pairs to read (None: all) and where the named documents stand."""
    ids = list(documents or [])
    if track_id is not None:
        ids += [d for d in await graph.track_documents(rag, track_id) if d not in ids]
        if not ids:
            raise InputError(f"LightRAG knows no document of track id {track_id!r}")
    if documents is None and track_id is None:
        return None, graph.Documents()
    states = await graph.document_states(rag, ids, wait_seconds)
    return await graph.document_pairs(rag, states.processed), states


# long: one pass in order — resume, read, run, journal, write — each step a call or two.
async def deduplicate(
    rag: Any,
    *,
    output: str | Path,
    documents: Sequence[str] | None = None,
    track_id: str | None = None,
    config: DeduplicateRelationsConfig | None = None,
    llm: LanguageModel | LLMSettings | None = None,
    embedding: EmbeddingModel | EmbeddingSettings | None = None,
    cache: RunCache | bool | None = True,
    reembed: bool = True,
    wait_seconds: float = 0.0,
    overwrite: bool = False,
    redecide: bool = False,
    progress: Progress | None = None,
    command: dict[str, Any] | None = None,
) -> LightragPass:
    """Deduplicate the edges of ``rag`` (an initialised ``LightRAG``), writing the run and
    the journal to ``output``.

    ``documents`` (ids) or ``track_id`` (what ``ainsert`` returned): only the edges those
    documents contributed; documents not processed yet are waited for up to
    ``wait_seconds``, then reported in ``waiting_documents``. ``llm``: a relmerge language
    model or :class:`~relmerge.config.LLMSettings` (default: rules only); ``embedding``: an
    embedder or its settings (default: relmerge's offline model). ``cache``: True keeps
    answers and vectors in ``OUT/.relmerge/cache.sqlite``. ``reembed=False`` writes the
    graph only and lists the changed edges' vectors as stale. A pass interrupted while it
    wrote edges is finished by calling this again with the same ``output``.

    Fragments an earlier pass into ``output`` decided (no question about them left open)
    are settled: the next pass judges new fragments against them, never settled ones
    against each other, so a pass after each insert asks about what the insert added.
    ``redecide=True`` judges every fragment again (after a change of model or settings).
    """
    out = Path(output)
    progress = as_progress(progress)
    latest = journal.current(out)
    if latest is not None and latest.state == journal.UNDOING:
        raise InputError(
            f"an undo of the last pass into {out} was interrupted: run `relmerge lightrag "
            "undo` again to finish it first"
        )
    if latest is not None and latest.state == journal.APPLYING:
        result = LightragPass(out, resumed=True)
        await _apply(rag, latest, forward=True, embed=reembed, result=result, progress=progress)
        result.edges_changed = len(latest.changes)
        return result
    config = config or DeduplicateRelationsConfig()
    run_cache = open_cache(cache, out)
    try:
        return await _pass(
            rag, out, documents, track_id, config, llm, embedding, run_cache, reembed,
            wait_seconds, overwrite or latest is not None, redecide, progress, command,
        )  # fmt: skip
    finally:
        if run_cache is not None:
            run_cache.close()


# long: the pass's steps in order, with the arguments ``deduplicate`` resolved.
async def _pass(
    rag: Any,
    out: Path,
    documents: Sequence[str] | None,
    track_id: str | None,
    config: DeduplicateRelationsConfig,
    llm: LanguageModel | LLMSettings | None,
    embedding: EmbeddingModel | EmbeddingSettings | None,
    cache: RunCache | None,
    reembed: bool,
    wait_seconds: float,
    overwrite: bool,
    redecide: bool,
    progress: Progress,
    command: dict[str, Any] | None,
) -> LightragPass:
    pairs, states = await _documents(rag, documents, track_id, wait_seconds)
    result = LightragPass(
        out,
        documents=states.processed,
        waiting_documents=states.waiting,
        failed_documents=states.failed,
        unknown_documents=states.unknown,
    )
    edges = await graph.read_edges(rag, pairs)
    if not edges:  # nothing to decide (e.g. the documents are not processed yet)
        return result
    nodes = await graph.read_nodes(rag, edges)
    imported, raws = edge_records(edges, nodes, await graph.chunk_documents(rag, edges), progress)
    result.edges_read = len(edges)
    result.fragments_before = len(imported.relations)
    result.fragments_after = result.fragments_before
    base = journal.folder(out)
    write_atomic(base / RELATIONS_FILE, jsonl_bytes(imported.relations))
    write_atomic(base / ENTITIES_FILE, jsonl_bytes(imported.entities))
    request = RunRequest(
        str(base / RELATIONS_FILE), str(out), out, {}, None, base / ENTITIES_FILE,
        overwrite, True, command,
    )  # fmt: skip
    models = models_for(llm, embedding, config, cache)
    known = set() if redecide else settled.read(base)
    pinned = frozenset(
        rid for rid in raws if settled.key(edges[imported.origins[rid]], raws[rid]) in known
    )
    run, _ = await run_into_out(
        request, open_store(str(out)), config, models, cache, None, progress, pinned
    )
    result.run = run
    result.fragments_settled = len(pinned)
    fragments = edge_fragments(imported, raws, read_run(out))
    changed = new_descriptions(imported, raws, fragments)
    changes = []
    for number, (description, count) in changed.items():
        edge = edges[number]
        before = edit_fields(edge.data)
        changes.append(
            journal.Change(edge.source, edge.target, before, {**before, "description": description})
        )
        result.fragments_after += count - graph.fragments(edge)
    info = {"documents": result.documents, "edges_read": len(edges), "track_id": track_id}
    pass_journal = journal.start(out, changes, info)
    await _apply(rag, pass_journal, forward=True, embed=reembed, result=result, progress=progress)
    asked = settled.questioned(out / (config.clarifications_key or ""))
    settled.write(base, known, edges, fragments, asked)
    result.edges_changed = len(changes)
    write_atomic(base / "pass.json", orjson.dumps(result.summary(), option=orjson.OPT_INDENT_2))
    return result


async def _apply(
    rag: Any,
    entry: journal.Journal,
    *,
    forward: bool,
    embed: bool,
    result: LightragPass | UndoResult,
    progress: Progress,
) -> None:
    """Write each change of ``entry`` (its ``after``, or its ``before`` going back), rebased
    on what LightRAG added since; mark a batch's edges done once it is persisted; the
    journal's state last."""
    done = entry.done()
    phase = "write_edges" if forward else "undo_edges"
    progress.start(phase, len(entry.changes))
    writer = EdgeWriter(rag, embed)
    written: list[int] = []  # changes handled since the last persist
    stale: list[tuple[str, str]] = []
    embedded: list[tuple[str, str]] = []
    for index, change in enumerate(entry.changes):
        if index not in done:
            pair = (change.source, change.target)
            target, base = (
                (change.after, change.before) if forward else (change.before, change.after)
            )
            now = await current_edge(rag, *pair)
            if now is None:
                result.gone_edges.append(pair)
            else:
                fields = rebase(target, base, now)
                if not same(now, fields):
                    await writer.write(change.source, change.target, fields)
                    (embedded if embed else stale).append(pair)
                if isinstance(result, UndoResult):
                    if same(fields, target):
                        result.restored += 1
                    else:
                        result.rebased += 1
            written.append(index)
            if len(written) >= BATCH:
                await _persisted(writer, entry, written)
        progress.advance(phase)
    await _persisted(writer, entry, written)
    entry.save(journal.APPLIED if forward else journal.UNDONE)
    progress.finish(phase)
    result.stale_edges.extend(stale)
    _keep_stale(entry.path.parent / STALE_FILE, embedded, stale)


async def _persisted(writer: EdgeWriter, entry: journal.Journal, written: list[int]) -> None:
    """Persist the batch, then record its changes as done (a kill between the two redoes
    them: writing a change twice gives the same edge)."""
    await writer.persist()
    entry.mark(written)
    written.clear()


def _keep_stale(path: Path, embedded: list[tuple[str, str]], stale: list[tuple[str, str]]) -> None:
    """``stale.json``: the edges whose vector is older than their text, across passes (an
    edge written with re-embedding is no longer stale)."""
    try:
        known = [tuple(pair) for pair in orjson.loads(path.read_bytes())]
    except (OSError, orjson.JSONDecodeError, TypeError):
        known = []
    kept = [pair for pair in known if pair not in set(embedded) | set(stale)] + stale
    if kept:
        write_atomic(path, orjson.dumps([list(pair) for pair in kept]))
    else:
        path.unlink(missing_ok=True)


async def undo(
    rag: Any,
    output: str | Path,
    *,
    reembed: bool = True,
    progress: Progress | None = None,
) -> UndoResult:
    """Take back every pass journalled in ``output``, the newest first: each edge gets its
    fields from before the pass, plus what LightRAG added to it since (``fields.rebase``),
    re-embedded unless ``reembed=False``. An undo interrupted is finished by calling this
    again."""
    out = Path(output)
    progress = as_progress(progress)
    result = UndoResult()
    for entry in journal.to_undo(out):
        if entry.state != journal.UNDOING:
            entry.save(journal.UNDOING)
        await _apply(rag, entry, forward=False, embed=reembed, result=result, progress=progress)
        result.passes += 1
    return result


__all__ = ["BATCH", "LightragPass", "UndoResult", "deduplicate", "reembed_call", "undo"]
