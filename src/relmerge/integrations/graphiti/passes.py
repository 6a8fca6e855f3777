"""A deduplication pass over a Graphiti group, through graphiti-core, and its undo.

The pass reads the group's live RELATES_TO edges (``graph``), makes a record of each
(``records``), runs them into OUT as ``relmerge run`` does (``run.batch``: the same kernel,
options, cache, canaries, review answers), plans each merged cluster the Graphiti way,
journals every edge and episode list it will change (``journal``), then writes them:

- the survivor (the cluster's first edge, oldest first) keeps its uuid; its fact becomes
  the run's merged description (every member's wording), its episodes the union of the
  members', its vector re-embedded with the graph's own ``EmbedderClient`` (without one it
  keeps its old vector and is listed in ``OUT/graphiti/stale.json``);
- each absorbed edge is deleted (``expire=True``: ``expired_at`` set instead);
- every episode whose ``entity_edges`` named an absorbed edge names the survivor.

Edges are merged only with edges of the same ``invalid_at``: a cluster mixing an
invalidated edge with a valid one is split here (``GraphitiPass.splits``), and expired
edges are not read as records at all. Undo takes the journalled passes back, newest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from relmerge.adapters.common import (
    ENTITIES_FILE,
    RELATIONS_FILE,
    Imported,
    jsonl_bytes,
    layout,
    ordered_union,
    read_run,
    write_atomic,
)
from relmerge.adapters.common import (
    RunResult as RunFiles,
)
from relmerge.cache import RunCache
from relmerge.config import DeduplicateRelationsConfig, EmbeddingSettings, LLMSettings
from relmerge.decide.merged import joined_description
from relmerge.errors import InputError
from relmerge.integrations.graphiti import graph, journal
from relmerge.integrations.graphiti.journal import EDGE, EPISODE, Change
from relmerge.integrations.graphiti.records import edge_records
from relmerge.progress import Progress, as_progress
from relmerge.providers.base import LanguageModel
from relmerge.providers.embedding import EmbeddingModel
from relmerge.run.batch import Models, RunRequest, models_for, open_cache, run_into_out
from relmerge.run.result import RunResult
from relmerge.stores import open_store

if TYPE_CHECKING:
    from graphiti_core.driver.driver import GraphDriver
    from graphiti_core.edges import EntityEdge
    from graphiti_core.embedder.client import EmbedderClient

STALE_FILE = "stale.json"
BATCH = 50  # changes written between two marks in the journal (a kill redoes at most these)


@dataclass
class GraphitiPass:
    """What a pass did: edges read (and expired ones left out), the survivors and what
    each absorbed, episodes rewritten, clusters split for their validity, the run it made
    (``run``: None for a resumed pass), and edges it could not write or re-embed."""

    out: Path
    group_id: str
    edges_read: int = 0
    edges_expired: int = 0
    survivors: list[str] = field(default_factory=list)
    absorbed: dict[str, str] = field(default_factory=dict)  # absorbed uuid -> survivor uuid
    episodes_changed: int = 0
    splits: list[list[str]] = field(default_factory=list)
    run: RunResult | None = None
    resumed: bool = False
    expire: bool = False
    gone_edges: list[str] = field(default_factory=list)  # deleted meanwhile: not written
    stale_edges: list[str] = field(default_factory=list)  # vector older than the fact

    def summary(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "edges_read": self.edges_read,
            "edges_expired": self.edges_expired,
            "survivors": self.survivors,
            "absorbed": self.absorbed,
            "episodes_changed": self.episodes_changed,
            "splits": self.splits,
            "resumed": self.resumed,
            "expire": self.expire,
            "gone_edges": self.gone_edges,
            "stale_edges": self.stale_edges,
        }


@dataclass
class UndoResult:
    """What an undo restored: passes taken back, edges and episode lists written back."""

    passes: int = 0
    edges_restored: int = 0
    episodes_restored: int = 0
    gone_edges: list[str] = field(default_factory=list)  # episodes deleted since: skipped


async def deduplicate(
    driver: GraphDriver,
    *,
    group_id: str,
    output: str | Path,
    embedder: EmbedderClient | None = None,
    config: DeduplicateRelationsConfig | None = None,
    llm: LanguageModel | LLMSettings | None = None,
    embedding: EmbeddingModel | EmbeddingSettings | None = None,
    cache: RunCache | bool | None = True,
    expire: bool = False,
    overwrite: bool = False,
    progress: Progress | None = None,
    command: dict[str, Any] | None = None,
) -> GraphitiPass:
    """Merge the duplicate RELATES_TO edges of ``group_id`` in the graph ``driver`` opens,
    writing the run and the journal to ``output``.

    ``embedder``: the graph's own graphiti ``EmbedderClient``, which re-embeds each
    survivor's new fact (without it the old vector stays and the edge is listed as
    stale). ``llm``: a relmerge language model or :class:`~relmerge.config.LLMSettings`
    (default: rules only); ``embedding``: relmerge's embedder for the decisions (default:
    its offline model). ``expire=True`` sets ``expired_at`` on absorbed edges instead of
    deleting them. ``overwrite``: replace a run in ``output`` made by something else (a
    pass into an OUT of earlier passes replaces their run). A pass interrupted while
    writing is finished by calling this again with the same ``output``; after
    ``relmerge review OUT`` the same call applies the answers."""
    out = Path(output)
    progress = as_progress(progress)
    latest = journal.current(out)
    if latest is not None and latest.state == journal.UNDOING:
        raise InputError(
            f"an undo of the last Graphiti pass into {out} was interrupted: run the undo "
            "again to finish it first"
        )
    if latest is not None and latest.state == journal.APPLYING:
        if latest.info.get("group_id") != group_id:
            raise InputError(
                f"the unfinished pass into {out} is of group {latest.info.get('group_id')!r}"
            )
        result = _resumed(out, latest)
        gdriver = await graph.group_driver(driver, group_id)
        await _apply(gdriver, out, latest, forward=True, result=result, progress=progress)
        return result
    config = config or DeduplicateRelationsConfig()
    run_cache = open_cache(cache, out)
    try:
        gdriver = await graph.group_driver(driver, group_id)
        models = models_for(llm, embedding, config, run_cache)
        request = _request(out, overwrite or latest is not None, command)
        return await _pass(
            gdriver, group_id, request, config, models, run_cache, embedder, expire, progress
        )
    finally:
        if run_cache is not None:
            run_cache.close()


def _request(out: Path, overwrite: bool, command: dict[str, Any] | None) -> RunRequest:
    base = journal.folder(out)
    return RunRequest(
        str(base / RELATIONS_FILE), str(out), out, {}, None, base / ENTITIES_FILE,
        overwrite, True, command,
    )  # fmt: skip


def _resumed(out: Path, entry: journal.Journal) -> GraphitiPass:
    """A pass's result as its journal holds it (to finish it, or to report it)."""
    info = entry.info
    return GraphitiPass(
        out,
        str(info.get("group_id")),
        edges_read=int(info.get("edges_read", 0)),
        edges_expired=int(info.get("edges_expired", 0)),
        survivors=list(info.get("survivors", [])),
        absorbed=dict(info.get("absorbed", {})),
        episodes_changed=sum(change.kind == EPISODE for change in entry.changes),
        splits=list(info.get("splits", [])),
        resumed=True,
        expire=bool(info.get("expire")),
        stale_edges=list(info.get("stale", [])),
    )


# long: the pass's steps in order — read, records, run, plan, journal, write.
async def _pass(
    driver: GraphDriver,
    group_id: str,
    request: RunRequest,
    config: DeduplicateRelationsConfig,
    models: Models,
    cache: RunCache | None,
    embedder: EmbedderClient | None,
    expire: bool,
    progress: Progress,
) -> GraphitiPass:
    out = Path(request.out)
    result = GraphitiPass(out, group_id, expire=expire)
    edges = await graph.read_edges(driver, group_id)
    result.edges_read = len(edges.live) + len(edges.expired)
    result.edges_expired = len(edges.expired)
    if not edges.live:
        return result
    ends = [uuid for edge in edges.live for uuid in (edge.source_node_uuid, edge.target_node_uuid)]
    nodes = await graph.read_nodes(driver, ends)
    imported = edge_records(edges.live, nodes, group_id)
    write_atomic(Path(request.input_path), jsonl_bytes(imported.relations))
    assert request.entities_path is not None
    write_atomic(request.entities_path, jsonl_bytes(imported.entities))
    run, _ = await run_into_out(
        request, open_store(str(out)), config, models, cache, None, progress
    )
    result.run = run
    changes = await _plan(driver, edges.live, imported, read_run(out), embedder, expire, result)
    info = {
        "group_id": group_id,
        "edges_read": result.edges_read,
        "edges_expired": result.edges_expired,
        "survivors": result.survivors,
        "absorbed": result.absorbed,
        "splits": result.splits,
        "expire": expire,
        "stale": result.stale_edges,
    }
    entry = journal.start(out, changes, info)
    await _apply(driver, out, entry, forward=True, result=result, progress=progress)
    write_atomic(
        journal.folder(out) / "pass.json",
        orjson.dumps(result.summary(), option=orjson.OPT_INDENT_2),
    )
    return result


def validity_parts(members: Sequence[EntityEdge]) -> list[list[EntityEdge]]:
    """The members grouped by ``invalid_at`` (valid ones together), in order: only edges
    of one part may merge, so an invalidated edge never absorbs or is absorbed by a
    valid one."""
    from graphiti_core.utils.datetime_utils import ensure_utc

    parts: dict[str, list[EntityEdge]] = {}
    for edge in members:
        moment = ensure_utc(edge.invalid_at)
        parts.setdefault("" if moment is None else moment.isoformat(), []).append(edge)
    return list(parts.values())


# long: one loop over the run's clusters, then the episodes they touch.
async def _plan(
    driver: GraphDriver,
    edges: Sequence[EntityEdge],
    imported: Imported,
    run: RunFiles,
    embedder: EmbedderClient | None,
    expire: bool,
    result: GraphitiPass,
) -> list[Change]:
    """The changes that apply the run's merges: survivors, then episodes, then the
    absorbed edges (undo goes the other way)."""
    survivors: list[Change] = []
    absorbed: list[Change] = []
    now = datetime.now(UTC).isoformat()
    for pieces in layout(imported, run).values():
        for piece in pieces:
            if piece.output is None or len(piece.members) < 2:
                continue
            members = [edges[imported.origins[uuid]] for uuid in piece.members]
            parts = validity_parts(members)
            if len(parts) > 1:
                result.splits.append([edge.uuid for edge in members])
            for part in (part for part in parts if len(part) > 1):
                whole = len(part) == len(members)
                fact = (
                    piece.output.description
                    if whole
                    else joined_description(edge.fact for edge in part)
                )
                lead = part[0]
                kept = lead.model_copy(deep=True)
                kept.fact = fact
                kept.episodes = ordered_union(edge.episodes for edge in part)
                if fact != lead.fact:
                    if embedder is not None:
                        await kept.generate_embedding(embedder)
                    else:
                        result.stale_edges.append(lead.uuid)
                survivors.append(
                    Change(EDGE, lead.uuid, graph.edge_fields(lead), graph.edge_fields(kept))
                )
                result.survivors.append(lead.uuid)
                for edge in part[1:]:
                    before = graph.edge_fields(edge)
                    after = {**before, "expired_at": now} if expire else None
                    absorbed.append(Change(EDGE, edge.uuid, before, after))
                    result.absorbed[edge.uuid] = lead.uuid
    mentioned = ordered_union(
        edges[imported.origins[uuid]].episodes for uuid in [*result.absorbed, *result.survivors]
    )
    episodes: list[Change] = []
    for uuid, episode in (await graph.read_episodes(driver, mentioned)).items():
        listed = renamed(episode.entity_edges, result.absorbed)
        if listed != list(episode.entity_edges):
            episodes.append(Change(EPISODE, uuid, list(episode.entity_edges), listed))
    result.episodes_changed = len(episodes)
    return survivors + episodes + absorbed


def renamed(entity_edges: Sequence[str], absorbed: dict[str, str]) -> list[str]:
    """An episode's edge list with each absorbed uuid named by its survivor (order kept,
    no repeats)."""
    return list(dict.fromkeys(absorbed.get(uuid, uuid) for uuid in entity_edges))


class GraphWriter:
    """Writes one journalled change forward or back through graphiti-core."""

    def __init__(self, driver: GraphDriver, absorbed: dict[str, str]) -> None:
        self.driver = driver
        self.absorbed = absorbed

    async def write(self, change: Change, forward: bool) -> bool:
        """Write the change; False when its object is gone (deleted meanwhile)."""
        if change.kind == EDGE:
            return await self._edge(change, forward)
        episodes = await graph.read_episodes(self.driver, [change.uuid])
        episode = episodes.get(change.uuid)
        if episode is None:
            return False
        now = list(episode.entity_edges)
        if forward:
            target = renamed(now, self.absorbed)
        else:  # before, plus what graphiti added since the pass
            known = set(change.before) | set(change.after)
            target = list(change.before) + [uuid for uuid in now if uuid not in known]
        if target != now:
            episode.entity_edges = target
            await episode.save(self.driver)
        return True

    async def _edge(self, change: Change, forward: bool) -> bool:
        fields = change.after if forward else change.before
        if fields is None:
            await graph.delete_edges(self.driver, [change.uuid])
            return True
        gone = forward and change.before is not None
        if gone and await graph.read_edge(self.driver, change.uuid) is None:
            return False  # deleted since the pass read it: not brought back
        await graph.save_edge(self.driver, fields)
        return True


async def _apply(
    driver: GraphDriver,
    out: Path,
    entry: journal.Journal,
    *,
    forward: bool,
    result: GraphitiPass | UndoResult,
    progress: Progress,
) -> None:
    """Write each change of ``entry`` not done yet (in order, or in reverse going back),
    marking them done in batches; the journal's state last."""
    done = entry.done()
    phase = "write_graphiti_edges" if forward else "undo_graphiti_edges"
    progress.start(phase, len(entry.changes))
    writer = GraphWriter(driver, dict(entry.info.get("absorbed", {})))
    order = range(len(entry.changes))
    written: list[int] = []
    for index in order if forward else reversed(order):
        change = entry.changes[index]
        if index not in done:
            if not await writer.write(change, forward):
                result.gone_edges.append(change.uuid)
            elif isinstance(result, UndoResult):
                if change.kind == EDGE:
                    result.edges_restored += 1
                else:
                    result.episodes_restored += 1
            written.append(index)
            if len(written) >= BATCH:
                entry.mark(written)
                written.clear()
        progress.advance(phase)
    entry.mark(written)
    entry.save(journal.APPLIED if forward else journal.UNDONE)
    progress.finish(phase)
    edges = [change.uuid for change in entry.changes if change.kind == EDGE]
    stale = list(entry.info.get("stale", [])) if forward else []
    _keep_stale(journal.folder(out), str(entry.info.get("group_id")), edges, stale)


def reembed_call(stale_file: str) -> str:
    """The Python that re-embeds the stale edges with the graph's own embedder."""
    return (
        "from graphiti_core.edges import EntityEdge\n"
        f"for uuid in json.load(open({stale_file!r}))['edges']:\n"
        "    edge = await EntityEdge.get_by_uuid(driver, uuid)\n"
        "    await edge.generate_embedding(embedder)\n"
        "    await edge.save(driver)"
    )


def _keep_stale(base: Path, group_id: str, written: list[str], stale: list[str]) -> None:
    """``stale.json``: the edges whose vector is older than their fact, across passes (an
    edge a pass or undo wrote with a fitting vector is no longer stale)."""
    path = base / STALE_FILE
    try:
        known = [str(uuid) for uuid in orjson.loads(path.read_bytes())["edges"]]
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        known = []
    kept = [uuid for uuid in known if uuid not in set(written)] + stale
    if kept:
        body = {"group_id": group_id, "edges": kept, "call": reembed_call(str(path))}
        write_atomic(path, orjson.dumps(body, option=orjson.OPT_INDENT_2))
    else:
        path.unlink(missing_ok=True)


async def undo(
    driver: GraphDriver,
    output: str | Path,
    *,
    embedder: EmbedderClient | None = None,
    progress: Progress | None = None,
) -> UndoResult:
    """Take back every pass journalled in ``output``, the newest first: each edge gets
    its fields from before the pass (a deleted one is recreated, embedding included) and
    each episode its edge list (plus edges graphiti added to it since). ``embedder``
    embeds a restored edge that had no vector. An interrupted undo is finished by calling
    this again."""
    out = Path(output)
    progress = as_progress(progress)
    result = UndoResult()
    for entry in journal.to_undo(out):
        if embedder is not None:
            await _embed_missing(entry, embedder)
        if entry.state != journal.UNDOING:
            entry.save(journal.UNDOING)
        gdriver = await graph.group_driver(driver, str(entry.info.get("group_id")))
        await _apply(gdriver, out, entry, forward=False, result=result, progress=progress)
        result.passes += 1
    return result


async def _embed_missing(entry: journal.Journal, embedder: EmbedderClient) -> None:
    """Give a vector to each before-image that has none (saved without, it stays none)."""
    for change in entry.changes:
        before = change.before if change.kind == EDGE else None
        if before is not None and before.get("fact_embedding") is None:
            text = str(before.get("fact", "")).replace("\n", " ")
            before["fact_embedding"] = await embedder.create(input_data=[text])


__all__ = ["GraphitiPass", "UndoResult", "deduplicate", "reembed_call", "undo"]
