"""Duplicates decided as edges arrive in Graphiti: Graphiti's own resolution against
relmerge's wrapper (``relmerge.integrations.graphiti.arrival``) on the same stream of edges.

    PYTHONPATH=src python bench/graphiti_arrival.py --pairs 30            # a slice (~1 min)
    PYTHONPATH=src python bench/graphiti_arrival.py --pairs 0 --json out.json   # all of dev

The stream: the dev set's relations (``../shared/data/dev``), entity ids mapped to the
canonical entities (names; profiles as the entities' summaries), the relations of the
first ``--pairs`` unordered entity pairs (0: all) in file order, each arriving alone
through ``Graphiti.add_triplet`` (fact = description, name = the relation's name in
Graphiti's SCREAMING_SNAKE form, dated, so no timestamp prompt) on an embedded Kuzu graph
(graphiti's own search finds the candidates; ``HashingEmbedder`` vectors).

The user's model is scripted from gold (``gold.jsonl``): Graphiti's ``resolve_edge``
question is answered with the existing facts of the new relation's gold cluster
(``duplicate_facts``), never a contradiction. Arms:

* ``graphiti``: Graphiti as it is, every question to that model;
* ``relmerge``: the wrapper, rules only; what they leave open keeps the model's own
  duplicate answer (the question then goes to the model as Graphiti asks it);
* ``relmerge+judge``: the wrapper with a gold-answering relmerge judge model
  (``GoldJudge``) for what the rules leave open (relmerge's ``relation_judge`` prompt
  with both entities' profiles; canaries off).

relmerge's embedder (its cosine bands): ``--embedding hash`` (default, fast) or ``use``.

Figures per arm: edges added; resolve questions Graphiti asked (``questions``: new edges
with some candidate); LLM calls and prompt tokens (characters / 4, the prompts as sent,
JSON schema included) per new edge, Graphiti's model and the judge's model apart;
duplicates left (by gold: surviving edges of a cluster beyond its first, summed) and
wrong merges (relations resolved onto an edge of another cluster).
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import os
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from labelled import DEV
from real_sources import REPO

sys.path.insert(0, str(REPO))  # tests.integrations.graphiti.support
os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")

from graphiti_core.edges import EntityEdge
from graphiti_core.graphiti import Graphiti
from graphiti_core.nodes import EntityNode
from tests.integrations.graphiti.support import (
    HashingEmbedder,
    LLMCall,
    OverlapCrossEncoder,
    ScriptedLLMClient,
    open_graph,
)

from relmerge.config import DeduplicateRelationsConfig
from relmerge.eval.gold import labelled_relations, load_gold
from relmerge.eval.gold_judge import GoldJudge
from relmerge.integrations.graphiti.arrival import RESOLVE_EDGE, wrap_graphiti
from relmerge.providers.base import LLMRequest, LLMResult
from relmerge.providers.embedding import HashEmbedder

ARMS = ("graphiti", "relmerge", "relmerge+judge")
VALID_AT = datetime(2024, 1, 1, tzinfo=UTC)


def _tokens(chars: int) -> float:
    return chars / 4


@dataclass
class Stream:
    relations: list[dict[str, Any]]
    clusters: dict[str, str]  # relation id -> gold cluster
    entities: dict[str, dict[str, Any]]  # canonical id -> entity


def load_stream(dev: Path, pairs: int) -> Stream:
    mapping = json.loads((dev / "entity_id_mapping.json").read_text(encoding="utf-8"))
    entities = {}
    for line in (dev / "entities.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            entity = json.loads(line)
            entities[entity["entity_id"]] = entity
    clusters = load_gold(dev / "gold.jsonl")
    relations = []
    for line in (dev / "relations.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            relation = json.loads(line)
            relation["source"] = mapping.get(relation["source_entity_id"])
            relation["target"] = mapping.get(relation["target_entity_id"])
            if relation["source"] in entities and relation["target"] in entities:
                relations.append(relation)
    chosen: list[frozenset[str]] = []
    for relation in relations:
        pair = frozenset((relation["source"], relation["target"]))
        if pair not in chosen and (pairs <= 0 or len(chosen) < pairs):
            chosen.append(pair)
    keep = set(chosen)
    stream = [r for r in relations if frozenset((r["source"], r["target"])) in keep]
    return Stream(stream, clusters, entities)


class CountingModel:
    """A relmerge ``LanguageModel`` counting requests and prompt characters."""

    def __init__(self, inner: GoldJudge) -> None:
        self.inner = inner
        self.name = inner.name
        self.available = True
        self.requests = 0
        self.chars = 0

    async def invoke(self, request: LLMRequest) -> LLMResult:
        self.requests += 1
        self.chars += sum(len(message.content) for message in request.messages)
        return await self.inner.invoke(request)


@dataclass
class Arm:
    name: str
    edges: int = 0
    questions: int = 0
    inner_calls: int = 0
    inner_chars: int = 0
    judge_calls: int = 0
    judge_chars: int = 0
    duplicates_left: int = 0
    wrong_merges: int = 0
    seconds: float = 0.0
    stats: dict[str, int] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        per = max(self.edges, 1)
        return {
            "arm": self.name,
            "edges": self.edges,
            "questions": self.questions,
            "calls/edge": round((self.inner_calls + self.judge_calls) / per, 3),
            "model calls/edge": round(self.inner_calls / per, 3),
            "judge calls/edge": round(self.judge_calls / per, 3),
            "prompt tokens/edge": round(_tokens(self.inner_chars + self.judge_chars) / per, 1),
            "duplicates left": self.duplicates_left,
            "wrong merges": self.wrong_merges,
            "seconds": round(self.seconds, 1),
            "wrapper": self.stats,
        }


def _gold_answer(stream: Stream, current: list[str]) -> Any:
    """The scripted user's model: duplicates = existing facts of the new relation's cluster
    (read from the prompt, as a model reads it), no contradiction."""
    texts: dict[str, set[str]] = defaultdict(set)
    for relation in stream.relations:
        texts[relation["description"]].add(stream.clusters.get(relation["relation_id"], "?"))

    def answer(call: LLMCall) -> dict[str, Any]:
        user = call.messages[-1].content
        block = user.split("<EXISTING FACTS>", 1)[1].split("</EXISTING FACTS>", 1)[0]
        existing = ast.literal_eval(block.strip())
        cluster = stream.clusters.get(current[0])
        duplicates = [item["idx"] for item in existing if cluster in texts.get(item["fact"], set())]
        return {"duplicate_facts": duplicates, "contradicted_facts": []}

    return answer


# long: one arm end to end (graph, clients, stream, gold accounting) reads best whole
async def run_arm(name: str, stream: Stream, dev: Path, folder: Path, embedding: str) -> Arm:
    arm = Arm(name)
    started = time.perf_counter()
    driver = await open_graph("kuzu", folder, group_id=name.replace("+", "_"))
    current: list[str] = [""]
    inner = ScriptedLLMClient({RESOLVE_EDGE: _gold_answer(stream, current)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        graphiti = Graphiti(
            graph_driver=driver,
            embedder=HashingEmbedder(),
            llm_client=inner,
            cross_encoder=OverlapCrossEncoder(),
        )
    judge_model: CountingModel | None = None
    client = None
    if name != "graphiti":
        gold_path = dev / "gold.jsonl"
        if name == "relmerge+judge":
            judge_model = CountingModel(
                GoldJudge(load_gold(gold_path), records=labelled_relations(gold_path))
            )
        client = wrap_graphiti(
            graphiti,
            judge_model,
            embedder=HashEmbedder() if embedding == "hash" else None,  # None: the default USE
            config=DeduplicateRelationsConfig(canaries=0),
        )
    group = name.replace("+", "_")
    nodes: dict[str, EntityNode] = {}
    for entity_id in sorted({r[end] for r in stream.relations for end in ("source", "target")}):
        entity = stream.entities[entity_id]
        node = EntityNode(
            name=entity["name"],
            group_id=group,
            labels=["Entity"],
            summary=entity.get("profile") or "",
        )
        await node.generate_name_embedding(graphiti.embedder)
        await node.save(driver)
        nodes[entity_id] = node
    holders: dict[str, list[str]] = defaultdict(list)  # edge uuid -> clusters resolved onto it
    try:
        for relation in stream.relations:
            current[0] = relation["relation_id"]
            edge = EntityEdge(
                group_id=group,
                source_node_uuid=nodes[relation["source"]].uuid,
                target_node_uuid=nodes[relation["target"]].uuid,
                name=relation["name"].upper().replace(" ", "_"),
                fact=relation["description"],
                episodes=[],
                created_at=VALID_AT,
                valid_at=VALID_AT,
            )
            result = await graphiti.add_triplet(
                nodes[relation["source"]], edge, nodes[relation["target"]]
            )
            holders[result.edges[0].uuid].append(stream.clusters.get(relation["relation_id"], "?"))
            arm.edges += 1
        calls = [call for call in inner.calls if call.prompt_name == RESOLVE_EDGE]
        others = [call for call in inner.calls if call.prompt_name != RESOLVE_EDGE]
        if others:
            raise AssertionError(f"unexpected prompts: {[c.prompt_name for c in others]}")
        arm.inner_calls = len(calls)
        arm.inner_chars = sum(len(m.content) for call in calls for m in call.messages)
        if judge_model is not None:
            arm.judge_calls, arm.judge_chars = judge_model.requests, judge_model.chars
        arm.questions = client.stats.questions if client is not None else len(calls)
        if client is not None:
            arm.stats = client.stats.figures()
        surviving = {
            e.uuid for e in await EntityEdge.get_by_group_ids(driver, [group]) if e.uuid in holders
        }
        per_cluster: dict[str, int] = defaultdict(int)
        for uuid in surviving:
            clusters = holders[uuid]
            arm.wrong_merges += sum(1 for c in clusters[1:] if c != clusters[0])
            for cluster in set(clusters):
                per_cluster[cluster] += 1
        arm.duplicates_left = sum(count - 1 for count in per_cluster.values())
    finally:
        await driver.close()  # type: ignore[no-untyped-call]
    arm.seconds = time.perf_counter() - started
    return arm


def show(rows: list[dict[str, Any]]) -> None:
    columns = [key for key in rows[0] if key != "wrapper"]
    widths = [max(len(col), *(len(str(row[col])) for row in rows)) for col in columns]
    print("  ".join(col.rjust(w) for col, w in zip(columns, widths, strict=True)))
    for row in rows:
        print("  ".join(str(row[col]).rjust(w) for col, w in zip(columns, widths, strict=True)))
    for row in rows:
        if row["wrapper"]:
            print(f"{row['arm']}: {row['wrapper']}")


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    stream = load_stream(args.dev, args.pairs)
    pairs = {frozenset((r["source"], r["target"])) for r in stream.relations}
    clusters = {stream.clusters.get(r["relation_id"]) for r in stream.relations}
    print(f"stream: {len(stream.relations)} edges, {len(pairs)} entity pairs, "
          f"{len(clusters)} gold facts")  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory(prefix="graphiti_arrival_") as tmp:
        for name in args.arms:
            rows.append((await run_arm(name, stream, args.dev, Path(tmp), args.embedding)).row())
    show(rows)
    return {"edges": len(stream.relations), "pairs": len(pairs), "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--pairs", type=int, default=30, help="entity pairs streamed (0: all)")
    parser.add_argument(
        "--embedding", choices=("hash", "use"), default="hash",
        help="relmerge's embedder: its hashing one, or its default (the offline USE)",
    )  # fmt: skip
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--json", type=Path, help="Also write the figures here.")
    args = parser.parse_args()
    started = time.perf_counter()
    found = asyncio.run(main_async(args))
    found["seconds"] = round(time.perf_counter() - started, 1)
    found["command"] = "PYTHONPATH=src python bench/graphiti_arrival.py " + " ".join(sys.argv[1:])
    print(f"\n{found['command']}  ({found['seconds']} s)")
    if args.json:
        args.json.write_text(json.dumps(found, indent=2, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
