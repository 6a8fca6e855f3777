"""The LightRAG pass (``relmerge.integrations.lightrag.deduplicate``) on real LightRAG
instances: quality and LLM requests against the offline run, incremental passes against
one pass, and seconds per 1,000 edges on LightRAG's file storages and on PostgreSQL.

    PYTHONPATH=src python bench/lightrag_pass.py --json out.json   # everything (~3 min)
    PYTHONPATH=src python bench/lightrag_pass.py --only quality incremental
    PYTHONPATH=src python bench/lightrag_pass.py --only speed --no-postgresql

Every graph is built with LightRAG's own API: one document per source chunk (per chunk
and fragment number for the real LightRAG graphs, whose fragments' chunks are unknown),
inserted with ``ainsert``; a scripted extraction model answers each document's
extraction prompt with that chunk's relations in LightRAG's extraction format
(``tests/integrations/lightrag/support.py``: ``extraction``). Gleaning is off, and LLM
summaries of merged descriptions are set never to happen (``force_llm_summary_on_merge``
and the summary sizes high), so every extraction stays a ``<SEP>`` fragment; the
extraction model counts any other prompt it gets (``other prompts``: should be 0).

Sets: ``dev`` (``../shared/data/dev``, all three domains; entity names are the canonical
entities' names, the entity mapping applied by extraction, as LightRAG merges within an
edge only) and the labelled real LightRAG graphs of ``bench/data/real_labels``
(``home-lab-agentic-ai``, ``lightrag-hku-1.5.7-pipeline``: their edges' fragments
re-extracted into a fresh LightRAG).

* ``quality``: the pass over the whole graph with the gold judge as LLM, against the
  same records (``records.edge_records`` of the same edges, read before the pass) run
  into a folder as ``relmerge run`` does, with the same judge, settings and embedder.
  Gold labels reach LightRAG's fragments by (entity pair, description text as LightRAG
  normalises it); pair F1 over gold's within-block pairs (doubtful pairs left out), the
  pass's read from the graph after the pass (a fragment holds a gold record when one of
  its lines is that record's text, or inside it: a merge leaves out a description that
  another member's contains). ``lost``: gold records whose text is on no fragment of
  their edge after the pass, and gold facts (clusters) none of whose texts is left: both
  must be 0.
* ``incremental``: ten dev documents inserted one at a time with a pass after each
  (``documents=[doc_id]``, one OUT, its run cache), against one pass over the same ten
  documents inserted at once; LLM requests of all passes / of the one pass (target
  ≤ 1.2×). Documents: the first ten in file order (``file``) and ten chosen greedily to
  share entity pairs (``shared``: the hard case); packed requests and unpacked
  (``--pack-tokens``).
* ``speed``: the dev set loaded ``--copies`` times (default once: 178 edges; entity names
  suffixed per copy) on LightRAG's default file storages and on PostgreSQL
  (``PGKVStorage``, ``PGDocStatusStorage``, ``PGTableGraphStorage``; vectors in the
  default ``NanoVectorDBStorage``; a throw-away server as ``tests/support/postgres.py``
  starts it): a pass rules only, one with the gold judge and one with the judge and
  ``reembed=False`` (each on the graph as built: undo after each), seconds per 1,000
  edges read. On file storages LightRAG's edit call persists every storage after each
  edge, so the write-back grows with edges changed × graph size: ``--copies 6`` takes
  more than ten minutes on two cores.

The embedder is relmerge's default (``--embedding use``), the hashing one (``hash``) or
none (``off``: ``semantic_merge=False``);
LightRAG's own embedding function is a hashing one (it only re-embeds edited edges).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labelled import DEV, Labelled, PairCounts, load_real, pair_counts
from real_sources import LIGHTRAG, REPO

sys.path.insert(0, str(REPO))  # tests.integrations.lightrag.support, tests.support.postgres

from tests.integrations.lightrag.support import Fact, Script, extraction, make_rag

from relmerge.adapters.common import jsonl_bytes, read_run, write_atomic
from relmerge.cache import CACHE_FILE, RunCache
from relmerge.config import DeduplicateRelationsConfig, EmbeddingSettings
from relmerge.eval.gold_judge import GoldJudge
from relmerge.integrations.lightrag import deduplicate, passes, undo
from relmerge.integrations.lightrag.edits import BATCH
from relmerge.integrations.lightrag.graph import GraphEdge, chunk_documents, read_edges, read_nodes
from relmerge.integrations.lightrag.records import edge_records, split_field, strip_quotes
from relmerge.normalize import normalize_description, normalize_key_text
from relmerge.progress import as_progress
from relmerge.providers.embedding import EmbeddingModel, HashEmbedder
from relmerge.providers.stack import build_embedder_stack, get_embedder
from relmerge.run.batch import Models, RunRequest, run_into_out
from relmerge.stores import open_store

MARK = re.compile(r"\[\[([^\[\]]+)\]\]")
NEVER = 10**6  # LightRAG's summary thresholds: no LLM summary of merged descriptions
LIGHTRAG_SETTINGS: dict[str, Any] = {
    "entity_extract_max_gleaning": 0,
    "entity_extract_max_records": 10_000,
    "entity_extract_max_entities": 10_000,
    "force_llm_summary_on_merge": NEVER,
    "summary_max_tokens": NEVER,
    "summary_context_size": NEVER,
    "max_total_tokens": NEVER,
}
PG_STORAGES = {
    "kv_storage": "PGKVStorage",
    "doc_status_storage": "PGDocStatusStorage",
    "graph_storage": "PGTableGraphStorage",
}


# ---------------------------------------------------------------- the sets, as documents


@dataclass
class Source:
    """A labelled set as LightRAG documents: each document's relations, and where each
    gold record lands in LightRAG (its entity pair and text, as LightRAG normalises them)."""

    name: str
    labelled: Labelled
    documents: dict[str, list[Fact]] = field(default_factory=dict)
    keys: dict[str, tuple[frozenset[str], str]] = field(default_factory=dict)  # gold id ->

    def judge(self) -> GoldJudge:
        """The gold judge, knowing each record by its own text and by LightRAG's."""
        shown = []
        for record in self.labelled.records:
            pair, _ = self.keys[record["relation_id"]]
            shown.append(record)
            shown.append({**record, "description": lightrag_text(record["description"])})
            if len(pair) == 2:
                first, second = sorted(pair)
                shown.append({**record, "source_entity_name": first, "target_entity_name": second})
        return GoldJudge(self.labelled.gold, records=shown)


def lightrag_name(name: str) -> str:
    from lightrag.utils import normalize_entity_name

    return str(normalize_entity_name(name))


def lightrag_text(text: str) -> str:
    from lightrag.utils import sanitize_and_normalize_extracted_text

    return str(sanitize_and_normalize_extracted_text(text))


def key_text(text: str) -> str:
    return normalize_description(strip_quotes(text))


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


def dev_source(dev: Path = DEV) -> Source:
    """One document per dev chunk; entity names: the canonical entities' names."""
    data = load_dev_all(dev)
    names: dict[str, str] = {}
    taken: set[str] = set()
    for entity in data.entities:
        name = lightrag_name(entity["name"])
        if name in taken:  # two canonical entities, one name: LightRAG would merge them
            name = f"{name} ({entity['entity_id']})"
        taken.add(name)
        names[entity["entity_id"]] = name
    source = Source("dev", data)
    for record in data.records:
        first, second = (names[end] for end in data.ends(record))
        document = f"dev:{record['chunk_id']}"
        fact = Fact(first, second, record["name"].strip(), record["description"])
        source.documents.setdefault(document, []).append(fact)
        source.keys[record["relation_id"]] = (
            frozenset((first, second)),
            key_text(lightrag_text(record["description"])),
        )
    return source


def real_source(name: str) -> Source:
    """The imported fragments of a real LightRAG graph, re-extracted: one document per
    (first chunk, fragment number), so no document holds two fragments of one edge."""
    data = load_real(name)
    source = Source(name, data)
    number: Counter[frozenset[str]] = Counter()
    for record in data.records:
        first = lightrag_name(record["source_entity_name"])
        second = lightrag_name(record["target_entity_name"])
        pair = frozenset((first, second))
        document = f"{name}:{record.get('chunk_id') or 'none'}:{number[pair]}"
        number[pair] += 1
        fact = Fact(first, second, record["name"], record["description"])
        source.documents.setdefault(document, []).append(fact)
        source.keys[record["relation_id"]] = (pair, key_text(lightrag_text(record["description"])))
    return source


def copies(source: Source, count: int) -> dict[str, list[Fact]]:
    """The source's documents ``count`` times, entity names suffixed per copy."""
    found: dict[str, list[Fact]] = {}
    for copy in range(count):
        tail = "" if copy == 0 else f" {copy}"
        for document, facts in source.documents.items():
            found[f"{document}~{copy}"] = [
                Fact(f.source + tail, f.target + tail, f.keywords, f.description) for f in facts
            ]
    return found


# ---------------------------------------------------------------- LightRAG, scripted


class Extractor(Script):
    """Answers the extraction prompt of the document whose marker ``[[id]]`` it shows;
    counts every other prompt (a summary would be one)."""

    def __init__(self, documents: dict[str, list[Fact]]) -> None:
        super().__init__()
        self.documents = documents
        self.extractions = 0
        self.other = 0

    async def llm(self, prompt: str, system_prompt: str | None = None, **_: Any) -> str:
        found = MARK.search(prompt) or MARK.search(system_prompt or "")
        if found and found.group(1) in self.documents:
            self.extractions += 1
            return extraction(self.documents[found.group(1)])
        self.other += 1
        return "<|COMPLETE|>"

    async def embed(self, texts: list[str], **kwargs: Any) -> Any:
        vectors = await super().embed(texts, **kwargs)
        self.embedded.clear()
        return vectors


def text_of(document: str) -> str:
    return f"[[{document}]] The relations of {document}."


WORKSPACES = itertools.count(1)


async def open_rag(folder: Path, extractor: Extractor, storages: dict[str, Any]) -> Any:
    """A LightRAG on ``folder``, in a workspace of its own (LightRAG keeps its storages'
    data per workspace in process memory: two instances must not share one)."""
    workspace = f"bench{next(WORKSPACES)}"
    rag = make_rag(folder, extractor, workspace=workspace, **LIGHTRAG_SETTINGS, **storages)
    await rag.initialize_storages()
    return rag


async def insert(rag: Any, documents: Sequence[str]) -> str:
    return str(await rag.ainsert([text_of(d) for d in documents], ids=list(documents)))


async def current_edges(rag: Any) -> list[GraphEdge]:
    return await read_edges(rag, None)


# ---------------------------------------------------------------- gold mapping


@dataclass
class Outcome:
    counts: PairCounts
    records_lost: int  # gold records whose text no fragment of their edge holds
    facts_lost: int  # gold clusters none of whose texts is left
    unplaced: int  # gold records LightRAG's graph never held (before the pass)


def graph_mapping(source: Source, edges: Sequence[GraphEdge]) -> tuple[dict[str, str], set[str]]:
    """Gold id -> the fragment (edge and number) holding its text: one of its lines, else
    the first fragment of the edge that contains it (a merge leaves out a description that
    another member's contains: ``decide.merged``); the gold ids with none."""
    where: dict[tuple[frozenset[str], str], str] = {}
    wholes: dict[frozenset[str], list[tuple[str, str]]] = defaultdict(list)
    for edge in edges:
        pair = frozenset((edge.source, edge.target))
        for index, fragment in enumerate(split_field(edge.data.get("description"))):
            place = f"{edge.source}|{edge.target}#{index}"
            wholes[pair].append((place, normalize_key_text(strip_quotes(fragment))))
            for text in [fragment, *strip_quotes(fragment).split("\n")]:
                where.setdefault((pair, key_text(text)), place)
    mapping: dict[str, str] = {}
    missing: set[str] = set()
    for rid, key in source.keys.items():
        pair, text = key
        inside = [place for place, whole in wholes[pair] if text and text in whole]
        if key in where:
            mapping[rid] = where[key]
        elif inside:
            mapping[rid] = inside[0]
        else:
            mapping[rid] = f"missing:{rid}"
            missing.add(rid)
    return mapping, missing


def outcome(source: Source, mapping: dict[str, str], missing: set[str], unplaced: int) -> Outcome:
    gold = source.labelled.gold
    clusters: dict[str, list[str]] = defaultdict(list)
    for rid in source.keys:
        clusters[gold[rid]].append(rid)
    lost_facts = sum(all(rid in missing for rid in members) for members in clusters.values())
    return Outcome(
        pair_counts(source.labelled, mapping), len(missing) - unplaced, lost_facts, unplaced
    )


def run_mapping(
    source: Source, imported_relations: Sequence[dict[str, Any]], run: Any
) -> tuple[dict[str, str], set[str]]:
    """Gold id -> output id of the offline run, through the fragment holding its text;
    the gold ids whose text their output's description does not hold."""
    by_key: dict[tuple[frozenset[str], str], str] = {}
    for relation in imported_relations:
        pair = frozenset((relation["source_entity_name"], relation["target_entity_name"]))
        by_key.setdefault((pair, key_text(relation["description"])), relation["relation_id"])
    mapping: dict[str, str] = {}
    missing: set[str] = set()
    for rid, key in source.keys.items():
        if key not in by_key:
            mapping[rid] = f"missing:{rid}"
            missing.add(rid)
            continue
        mapping[rid] = run.mapping[by_key[key]]
        output = run.relations.get(mapping[rid])
        lines = [] if output is None else output.description.split("\n")
        held = {key_text(line) for line in lines}
        whole = "" if output is None else normalize_key_text(output.description)
        if key[1] not in held and key[1] not in whole:
            missing.add(rid)
    return mapping, missing


# ---------------------------------------------------------------- runs


def embedder_for(kind: str) -> EmbeddingModel | None:
    """None: relmerge's default (the pass builds it from its settings)."""
    return None if kind == "use" else HashEmbedder()


async def offline_run(
    edges: Sequence[GraphEdge],
    rag: Any,
    out: Path,
    config: DeduplicateRelationsConfig,
    judge: GoldJudge,
    embedding: EmbeddingModel | None,
) -> tuple[Any, list[dict[str, Any]], float]:
    """``relmerge run`` on the records of ``edges`` (as the pass makes them), in ``out``."""
    started = time.perf_counter()
    nodes = await read_nodes(rag, edges)
    documents = await chunk_documents(rag, edges)
    imported, _ = edge_records(edges, nodes, documents, as_progress(None))
    out.mkdir(parents=True)
    write_atomic(out / "relations.jsonl", jsonl_bytes(imported.relations))
    write_atomic(out / "entities.jsonl", jsonl_bytes(imported.entities))
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
    return run, list(imported.relations), time.perf_counter() - started


def pass_row(done: Any, seconds: float) -> dict[str, Any]:
    return {
        "edges_read": done.edges_read,
        "edges_changed": done.edges_changed,
        "fragments_before": done.fragments_before,
        "fragments_after": done.fragments_after,
        "llm_requests": done.run.llm_requests if done.run else 0,
        "seconds": round(seconds, 2),
    }


def scores(found: Outcome) -> dict[str, Any]:
    return {
        "pair_f1": round(found.counts.f1, 4),
        "precision": round(found.counts.precision, 4),
        "recall": round(found.counts.recall, 4),
        "records_lost": found.records_lost,
        "facts_lost": found.facts_lost,
        "not_in_lightrag": found.unplaced,
    }


async def quality(
    source: Source, folder: Path, config: DeduplicateRelationsConfig, kind: str
) -> dict[str, Any]:
    """Build, read, run offline on the same edges, pass, score both."""
    extractor = Extractor(source.documents)
    rag = await open_rag(folder / "rag", extractor, {})
    started = time.perf_counter()
    await insert(rag, list(source.documents))
    built = time.perf_counter() - started
    edges = await current_edges(rag)
    _, missing_before = graph_mapping(source, edges)
    judge = source.judge()
    embedding = embedder_for(kind)
    run, relations, offline_seconds = await offline_run(
        edges, rag, folder / "offline", config, judge, embedding
    )
    offline = outcome(
        source, *run_mapping(source, relations, read_run(folder / "offline" / "run")),
        len(missing_before),
    )  # fmt: skip
    started = time.perf_counter()
    done = await deduplicate(
        rag, output=folder / "pass", config=config, llm=source.judge(), embedding=embedding
    )
    seconds = time.perf_counter() - started
    mapping, missing = graph_mapping(source, await current_edges(rag))
    after = outcome(source, mapping, missing, len(missing_before))
    await rag.finalize_storages()
    return {
        "set": source.name,
        "documents": len(source.documents),
        "gold_records": len(source.keys),
        "build_seconds": round(built, 2),
        "other_prompts": extractor.other,
        "pass": {**pass_row(done, seconds), **scores(after)},
        "offline": {
            "records": len(relations),
            "llm_requests": run.llm_requests,
            "seconds": round(offline_seconds, 2),
            **scores(offline),
        },
    }


def pick_documents(source: Source, count: int, selection: str) -> list[str]:
    """``count`` documents: the first in file order (``file``), or chosen greedily to share
    entity pairs with those chosen (``shared``: the hard case, every pass re-judges)."""
    if selection == "file":
        return list(source.documents)[:count]
    pairs = {
        d: [frozenset((f.source, f.target)) for f in facts] for d, facts in source.documents.items()
    }
    chosen = [max(pairs, key=lambda d: (len(pairs[d]), d))]
    seen = set(pairs[chosen[0]])
    while len(chosen) < count:
        rest = [d for d in pairs if d not in chosen]
        best = max(rest, key=lambda d: (sum(p in seen for p in pairs[d]), len(pairs[d]), d))
        chosen.append(best)
        seen |= set(pairs[best])
    return chosen


def corpus_documents(source: Source, count: int) -> dict[str, list[Fact]]:
    """The whole set as ``count`` documents of consecutive chunks (each chunk's facts in
    its document's extraction): a corpus inserted in ten parts."""
    names = list(source.documents)
    size = -(-len(names) // count)
    return {
        f"part-{number + 1:02d}": [
            f for d in names[start : start + size] for f in source.documents[d]
        ]
        for number, start in enumerate(range(0, len(names), size))
    }


async def incremental(
    source: Source,
    folder: Path,
    config: DeduplicateRelationsConfig,
    kind: str,
    count: int,
    selection: str,
) -> dict[str, Any]:
    if selection == "corpus":
        documents = corpus_documents(source, count)
        chosen = list(documents)
    else:
        chosen = pick_documents(source, count, selection)
        documents = {d: source.documents[d] for d in chosen}
    subset = Source(source.name, source.labelled, documents)
    held = {
        (frozenset((f.source, f.target)), key_text(lightrag_text(f.description)))
        for d in chosen
        for f in documents[d]
    }
    subset.keys = {rid: key for rid, key in source.keys.items() if key in held}
    whole = source.labelled
    subset.labelled = Labelled(
        whole.name,
        [r for r in whole.records if r["relation_id"] in subset.keys],
        {rid: whole.gold[rid] for rid in subset.keys},
        whole.mapping,
        whole.entities,
        whole.hard_negatives,
        whole.doubtful,
    )
    embedding = embedder_for(kind)
    judge = source.judge()
    extractor = Extractor(subset.documents)
    rag = await open_rag(folder / "one-by-one", extractor, {})
    passes = []
    started = time.perf_counter()
    for document in chosen:
        await insert(rag, [document])
        done = await deduplicate(
            rag, output=folder / "one-by-one-out", documents=[document], config=config,
            llm=judge, embedding=embedding,
        )  # fmt: skip
        passes.append(pass_row(done, 0.0))
    stepwise_seconds = time.perf_counter() - started
    mapping, missing = graph_mapping(subset, await current_edges(rag))
    stepwise = outcome(subset, mapping, missing, 0)
    await rag.finalize_storages()
    rag = await open_rag(folder / "at-once", Extractor(subset.documents), {})
    await insert(rag, chosen)
    started = time.perf_counter()
    done = await deduplicate(
        rag, output=folder / "at-once-out", config=config, llm=source.judge(), embedding=embedding
    )
    once_seconds = time.perf_counter() - started
    mapping, missing = graph_mapping(subset, await current_edges(rag))
    once = outcome(subset, mapping, missing, 0)
    await rag.finalize_storages()
    requests = sum(p["llm_requests"] for p in passes)
    once_requests = done.run.llm_requests if done.run else 0
    return {
        "set": source.name,
        "documents": chosen,
        "gold_records": len(subset.keys),
        "passes": passes,
        "one_by_one": {
            "llm_requests": requests,
            "edges_read": sum(p["edges_read"] for p in passes),
            "seconds_with_inserts": round(stepwise_seconds, 2),
            **scores(stepwise),
        },
        "at_once": {**pass_row(done, once_seconds), **scores(once)},
        "ratio": round(requests / once_requests, 3) if once_requests else None,
    }


@contextlib.contextmanager
def postgres_env() -> Iterator[None]:
    """A throw-away PostgreSQL server, LightRAG's environment pointing at its socket."""
    from tests.support.postgres import SUPERUSER, postgres_server

    with contextlib.contextmanager(postgres_server)() as server:
        names = ("HOST", "PORT", "USER", "PASSWORD", "DATABASE")
        saved = {n: os.environ.get(f"POSTGRES_{n}") for n in names}
        os.environ.update(
            POSTGRES_HOST=str(server.root),
            POSTGRES_PORT="5432",
            POSTGRES_USER=SUPERUSER,
            POSTGRES_PASSWORD="unused",
            POSTGRES_DATABASE="postgres",
        )
        try:
            yield
        finally:
            for n, value in saved.items():
                if value is None:
                    os.environ.pop(f"POSTGRES_{n}", None)
                else:
                    os.environ[f"POSTGRES_{n}"] = value


async def speed(
    source: Source,
    folder: Path,
    config: DeduplicateRelationsConfig,
    kind: str,
    count: int,
    storage: str,
) -> dict[str, Any]:
    documents = copies(source, count)
    extractor = Extractor(documents)
    rag = await open_rag(
        folder / f"speed-{storage}", extractor, PG_STORAGES if storage == "postgresql" else {}
    )
    started = time.perf_counter()
    await insert(rag, list(documents))
    built = time.perf_counter() - started
    embedding = embedder_for(kind)
    row: dict[str, Any] = {
        "storage": storage,
        "documents": len(documents),
        "build_seconds": round(built, 2),
        "other_prompts": extractor.other,
    }
    variants = (("rules", None, True, BATCH), ("judge", source.judge(), True, BATCH))
    for name, llm, reembed, batch in (
        *variants,
        ("judge, no re-embedding", source.judge(), False, BATCH),
        # the baseline: persisted after every edge, as `rag.aedit_relation` does
        ("judge, persist per edge", source.judge(), True, 1),
    ):
        out = folder / f"speed-{storage}-{len(row)}"
        passes.BATCH = batch
        started = time.perf_counter()
        done = await deduplicate(
            rag, output=out, config=config, llm=llm, embedding=embedding, reembed=reembed
        )
        seconds = time.perf_counter() - started
        started = time.perf_counter()
        taken = await undo(rag, out, reembed=reembed)
        undo_seconds = time.perf_counter() - started
        passes.BATCH = BATCH
        row[name] = {
            **pass_row(done, seconds),
            "seconds_per_1000_edges": round(1000 * seconds / max(1, done.edges_read), 2),
            "undo_seconds": round(undo_seconds, 2),
            "undo_restored": taken.restored,
        }
    await rag.finalize_storages()
    return row


# ---------------------------------------------------------------- printing


def show_quality(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'set':<30}{'how':<9}{'edges':>6}{'frags':>7}{'after':>7}{'requests':>9}"
        f"{'pair F1':>9}{'P':>7}{'R':>7}{'lost':>6}{'facts lost':>11}{'seconds':>9}"
    )
    for row in rows:
        p, o = row["pass"], row["offline"]
        print(
            f"{row['set']:<30}{'pass':<9}{p['edges_read']:>6}{p['fragments_before']:>7}"
            f"{p['fragments_after']:>7}{p['llm_requests']:>9}{p['pair_f1']:>9.3f}"
            f"{p['precision']:>7.3f}{p['recall']:>7.3f}{p['records_lost']:>6}"
            f"{p['facts_lost']:>11}{p['seconds']:>9.2f}"
        )
        print(
            f"{'':<30}{'offline':<9}{'':>6}{o['records']:>7}{'':>7}{o['llm_requests']:>9}"
            f"{o['pair_f1']:>9.3f}{o['precision']:>7.3f}{o['recall']:>7.3f}{o['records_lost']:>6}"
            f"{o['facts_lost']:>11}{o['seconds']:>9.2f}"
        )


def show_incremental(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'documents':<11}{'pack tokens':<13}{'how':<24}{'requests':>9}{'edges read':>11}"
        f"{'pair F1':>9}{'facts lost':>11}{'ratio':>7}"
    )
    for row in rows:
        for how, label in (
            ("one_by_one", "10 passes, one a doc"),
            ("at_once", "1 pass at the end"),
        ):
            r = row[how]
            ratio = f"{row['ratio']:.2f}" if how == "one_by_one" and row["ratio"] else ""
            print(
                f"{row['selection']:<11}{row['pack_tokens']:<13}{label:<24}{r['llm_requests']:>9}"
                f"{r['edges_read']:>11}{r['pair_f1']:>9.3f}{r['facts_lost']:>11}{ratio:>7}"
            )
        print(f"{'':<24}requests per pass: {[p['llm_requests'] for p in row['passes']]}")
    for selection in sorted({row["selection"] for row in rows}):
        chosen = next(row["documents"] for row in rows if row["selection"] == selection)
        print(f"documents ({selection}): {', '.join(chosen)}")


def show_speed(rows: list[dict[str, Any]]) -> None:
    names = ("rules", "judge", "judge, no re-embedding", "judge, persist per edge")
    print(
        f"{'storage':<12}{'pass':<24}{'edges':>7}{'frags':>7}{'after':>7}{'requests':>9}"
        f"{'seconds':>9}{'s/1k edges':>11}{'undo s':>8}"
    )
    for row in rows:
        for name in names:
            r = row[name]
            print(
                f"{row['storage']:<12}{name:<24}{r['edges_read']:>7}{r['fragments_before']:>7}"
                f"{r['fragments_after']:>7}{r['llm_requests']:>9}{r['seconds']:>9.2f}"
                f"{r['seconds_per_1000_edges']:>11.2f}{r['undo_seconds']:>8.2f}"
            )


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    import logging

    from lightrag.utils import logger

    logger.setLevel(logging.WARNING)  # its INFO lines: a few per document and per edit
    config = DeduplicateRelationsConfig(semantic_merge=args.embedding != "off")
    kind = args.embedding
    dev = dev_source(args.dev)
    found: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="relmerge-lightrag-bench-") as tmp:
        folder = Path(tmp)
        if "quality" in args.only:
            found["quality"] = []
            for source in [dev, *(real_source(name) for name in LIGHTRAG)]:
                row = await quality(source, folder / f"q-{source.name}", config, kind)
                found["quality"].append(row)
            show_quality(found["quality"])
        if "incremental" in args.only:
            found["incremental"] = []
            for selection in ("corpus", "file", "shared"):
                for pack in args.pack_tokens:
                    packed = config.model_copy(update={"llm_pack_tokens": pack})
                    row = await incremental(
                        dev, folder / f"incremental-{selection}-{pack}", packed, kind,
                        args.documents, selection,
                    )  # fmt: skip
                    found["incremental"].append(
                        {"selection": selection, "pack_tokens": pack, **row}
                    )
            show_incremental(found["incremental"])
        if "speed" in args.only:
            found["speed"] = [await speed(dev, folder, config, kind, args.copies, "files")]
            if args.postgresql:
                with postgres_env():
                    found["speed"].append(
                        await speed(dev, folder, config, kind, args.copies, "postgresql")
                    )
            show_speed(found["speed"])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument(
        "--only", nargs="+", choices=("quality", "incremental", "speed"),
        default=["quality", "incremental", "speed"],
    )  # fmt: skip
    parser.add_argument(
        "--embedding", choices=("use", "hash", "off"), default="use",
        help="use: relmerge's default embedder; hash: the hashing one; off: semantic_merge=False",
    )  # fmt: skip
    parser.add_argument("--documents", type=int, default=10, help="incremental: documents")
    parser.add_argument(
        "--pack-tokens", type=int, nargs="+", default=[8000, 0],
        help="incremental: llm_pack_tokens of each run (8000: the default; 0: unpacked)",
    )  # fmt: skip
    parser.add_argument("--copies", type=int, default=1, help="speed: copies of the dev set")
    parser.add_argument("--no-postgresql", dest="postgresql", action="store_false")
    parser.add_argument("--json", type=Path, help="Also write the figures here.")
    args = parser.parse_args()
    started = time.perf_counter()
    found = asyncio.run(main_async(args))
    found["seconds"] = round(time.perf_counter() - started, 1)
    found["command"] = "PYTHONPATH=src python bench/lightrag_pass.py " + " ".join(sys.argv[1:])
    print(f"\n{found['command']}  ({found['seconds']} s)")
    if args.json:
        args.json.write_text(json.dumps(found, indent=2, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
