"""Report candidates: a relation alone in its block is embedded only when the entity
report could compare it, and the report's findings are those of embedding everything."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

import relmerge.run.pipeline as pipeline
from relmerge.config import DeduplicateRelationsConfig
from relmerge.io.load import read_entities, read_entity_mapping, read_input
from relmerge.io.records import RawRecord
from relmerge.providers.base import NoLanguageModel
from relmerge.providers.embedding import CachedEmbedder, HashEmbedder, Vectors
from relmerge.run.pipeline import run_pipeline
from relmerge.run.result import RunOutput
from relmerge.stages.semantic.partners import report_candidates
from relmerge.stores.memory import MemoryStore

ROOT = Path(__file__).resolve().parents[3]
DEV = ROOT.parent / "shared" / "data" / "dev"
GRAPHRAG = ROOT.parent / "shared" / "data" / "real" / "graphrag-christmas-carol"
needs_data = pytest.mark.skipif(
    not DEV.is_dir() or not GRAPHRAG.is_dir(), reason="shared data not present"
)


def _alike_by(groups: dict[str, int]) -> Any:
    """An embedder where names of one group are the same vector, all others orthogonal."""

    async def embed(texts: Sequence[str]) -> Vectors:
        vectors = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            vectors[row, groups.get(text, 10 + row % 50)] = 1.0
        return vectors

    return embed


async def _marks(
    relations: list[tuple[int, int]], names: list[str], limit: int = 200, single: bool = True
) -> list[bool]:
    ends = np.array(relations, dtype=np.int64)
    singleton = np.full(len(relations), single)
    # Each entity is written with one name: its own number.
    found = await report_candidates(
        ends, ends.copy(), names, singleton, limit, _alike_by({"Munich": 1, "慕尼黑": 1})
    )
    return [bool(mark) for mark in found]


NAMES = ["Siemens", "Acme Systems", "Acme Systems Inc.", "Linwood", "Linford", "Munich", "慕尼黑"]


async def test_partners_with_alike_other_names_are_marked() -> None:
    # Siemens -> each of the others; names alike by tokens (Acme), not (Linwood/Linford).
    marks = await _marks([(0, 1), (0, 2), (0, 3), (0, 4)], NAMES)
    assert marks == [True, True, False, False]


async def test_alike_in_meaning_counts_and_roles_must_match() -> None:
    marks = await _marks([(0, 5), (0, 6), (5, 3), (3, 6)], NAMES)
    # Siemens -> Munich / 慕尼黑: same anchor and role, alike by vector; the other two share
    # no endpoint in the same role with an alike partner.
    assert marks == [True, True, False, False]


async def test_only_the_first_limit_other_entities_of_an_anchor_are_compared() -> None:
    # Siemens' first two other entities are Acme Systems and Linwood: with a limit of 2
    # the report never sees Acme Systems Inc., so nothing needs a vector.
    marks = await _marks([(0, 1), (0, 3), (0, 2)], NAMES, limit=2)
    assert marks == [False, False, False]
    assert await _marks([(0, 1), (0, 3), (0, 2)], NAMES, limit=3) == [True, False, True]


async def test_relations_in_larger_blocks_always_need_vectors() -> None:
    assert await _marks([(0, 1), (0, 3)], NAMES, single=False) == [True, True]
    assert await _marks([(0, 1), (0, 3)], NAMES, limit=0) == [False, False]


async def _everything(*args: Any) -> Any:
    return np.ones(len(args[0]), dtype=np.bool_)


async def _run(raws: list[RawRecord], chunk: int, dev: bool) -> tuple[RunOutput, MemoryStore]:
    store = MemoryStore()
    output = await run_pipeline(
        raws,
        read_entity_mapping(DEV / "entity_id_mapping.json") if dev else None,
        DeduplicateRelationsConfig(records_per_chunk=chunk),
        NoLanguageModel(),
        store,
        embedder=CachedEmbedder(HashEmbedder()),
        entities=read_entities(DEV / "entities.jsonl") if dev else (),
    )
    return output, store


def _synthetic(shape: str, size: int) -> list[RawRecord]:
    sys.path.insert(0, str(ROOT / "bench"))
    from synthetic import generate_semantic

    lines = (GRAPHRAG / "relations.jsonl").read_bytes().splitlines()
    texts = [orjson.loads(line)["description"] for line in lines if line.strip()]
    records, _ = generate_semantic(size, 3, shape, texts)
    return [RawRecord(f"line {i}", record) for i, record in enumerate(records)]


@needs_data
@pytest.mark.parametrize("batch", ["dev", "graphrag", "semantic"])
async def test_findings_are_those_of_embedding_every_relation(
    batch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if batch == "dev":
        raws = list(await read_input(DEV / "relations.jsonl"))
    else:
        raws = _synthetic(batch, 6000)
    chosen, chosen_store = await _run(raws, 1500, batch == "dev")
    monkeypatch.setattr(pipeline, "report_candidates", _everything)
    every, every_store = await _run(raws, 1500, batch == "dev")

    assert chosen_store.objects == every_store.objects  # relations, decisions, clarifications
    assert chosen.result["issues"] == every.result["issues"]
    found = [i for i in every.result["issues"] if i["code"] == "possible_entity_duplicate"]
    assert found  # the report has findings to keep
    embedded = chosen.result["engine"]["texts_embedded"]
    assert embedded < every.result["engine"]["texts_embedded"]
    if batch == "graphrag":  # most relations are alone in their block: most are spared
        assert embedded < every.result["engine"]["texts_embedded"] / 2
