"""Shared helpers of the tests on folders written by GraphRAG and LightRAG themselves.

The folders are in ``../shared/data/upstream`` (origins in its README). Tests on them are
skipped only when that folder is absent, and never under CI. A run merges something in
each of them: an entity mapping folds a few entities into others (so blocks hold several
rows), and a judge served over HTTP on 127.0.0.1 says every pair it is asked about is one
fact.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from relmerge.eval.gold_judge import GoldJudge
from tests.adapters.fixtures import cli
from tests.support.gold_judge import gold_task_handler
from tests.support.llm_server import LLMServer

UPSTREAM = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "upstream"
needs_upstream = pytest.mark.skipif(
    not UPSTREAM.is_dir() and not os.environ.get("CI"),
    reason="../shared/data/upstream not present",
)


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def fold_mapping(relations: Sequence[dict[str, Any]], pairs: int) -> dict[str, str]:
    """Entity id → canonical id for up to ``pairs`` disjoint entity pairs that share the
    most neighbours: folding one into the other puts two rows in each shared block."""
    neighbours: dict[str, set[str]] = defaultdict(set)
    for record in relations:
        source, target = record["source_entity_id"], record["target_entity_id"]
        if source and target and source != target:
            neighbours[source].add(target)
            neighbours[target].add(source)
    shared: Counter[tuple[str, str]] = Counter()
    for around in neighbours.values():
        ends = sorted(around)
        for i, first in enumerate(ends):
            for second in ends[i + 1 :]:
                shared[(first, second)] += 1
    mapping: dict[str, str] = {}
    used: set[str] = set()
    for (first, second), _ in shared.most_common():
        if len(mapping) == pairs:
            break
        if first in used or second in used:
            continue
        used.update((first, second))
        mapping[first] = second
    return mapping


@contextmanager
def one_fact_judge(relations: Sequence[dict[str, Any]]) -> Iterator[LLMServer]:
    """An OpenAI-compatible server whose model says all records are one fact."""
    judge = GoldJudge({record["relation_id"]: "one" for record in relations}, records=relations)
    with LLMServer(handler=gold_task_handler(judge)) as server:
        yield server


def import_run(
    fmt: str, source: Path, work: Path, pairs: int = 4, *extra: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """``relmerge import`` then ``relmerge run`` (entity folds, the one-fact judge):
    the run's result and its relation id mapping."""
    code, text = cli("import", fmt, str(source), "--output", str(work))
    assert code == 0, text
    relations = jsonl(work / "relations.jsonl")
    mapping = fold_mapping(relations, pairs)
    (work / "entity_mapping.json").write_bytes(orjson.dumps(mapping))
    with one_fact_judge(relations) as server:
        code, text = cli(
            "run",
            str(work / "relations.jsonl"),
            "--entities",
            str(work / "entities.jsonl"),
            "--entity-mapping",
            str(work / "entity_mapping.json"),
            "--output",
            str(work / "run"),
            "--embedding",
            "hash",
            "--llm-base-url",
            server.base_url,
            "--llm-model",
            "one-fact",
            "-q",
            *extra,
        )
    assert code == 0, text
    result = orjson.loads((work / "run" / "deduplicate_relations_result.json").read_bytes())
    id_mapping = orjson.loads((work / "run" / "relation_id_mapping.json").read_bytes())
    return result, id_mapping
