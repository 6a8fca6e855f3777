"""A batch decided a chunk of blocks at a time gives the whole-batch result.

Blocks are independent, so cutting the dev set into many chunks (and parking records in
the temporary spool file between them) must change nothing a user sees: the same output
relations, id mapping, counts, issues, decisions and clarifications (logs may list them
in another order).
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from relmerge.config import DeduplicateRelationsConfig
from relmerge.errors import ProviderError
from relmerge.eval.gold import labelled_relations, load_gold
from relmerge.eval.gold_judge import GoldJudge
from relmerge.io.load import read_entities, read_entity_mapping, read_input
from relmerge.providers.base import LanguageModel, NoLanguageModel
from relmerge.providers.embedding import CachedEmbedder, HashEmbedder
from relmerge.run.pipeline import run_pipeline
from relmerge.run.result import RunOutput
from relmerge.stores.memory import MemoryStore
from tests.support.engines import Refused

DEV = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "dev"
needs_dev = pytest.mark.skipif(not DEV.is_dir(), reason="shared dev set not present")

SAME_KEYS = (
    "input_record_count",
    "input_relation_count",
    "output_relation_count",
    "exact_merge_count",
    "semantic_merge_count",
    "failed_group_count",
    "llm_needed_pair_count",
    "llm_needed_block_count",
    "llm_needed_pair_tiers",
    "llm_needed_description_only_pair_count",
    "human_merge_count",
    "clarification_count",
    "blocking",
    "decisions_by_tier",
    "llm_requests",
    "tokens",
)


async def _run(
    llm: LanguageModel, records_per_chunk: int, **settings: Any
) -> tuple[RunOutput, MemoryStore]:
    store = MemoryStore()
    output = await run_pipeline(
        await read_input(DEV / "relations.jsonl"),
        read_entity_mapping(DEV / "entity_id_mapping.json"),
        DeduplicateRelationsConfig(records_per_chunk=records_per_chunk, **settings),
        llm,
        store,
        embedder=CachedEmbedder(HashEmbedder()),
        entities=read_entities(DEV / "entities.jsonl"),
    )
    return output, store


def _lines(store: MemoryStore, key: str) -> Counter[bytes]:
    return Counter(store.objects[key].splitlines())


def _issues(output: RunOutput) -> Counter[bytes]:
    return Counter(
        orjson.dumps(issue, option=orjson.OPT_SORT_KEYS) for issue in output.result["issues"]
    )


def _assert_same(
    whole: tuple[RunOutput, MemoryStore], chunked: tuple[RunOutput, MemoryStore]
) -> None:
    (a, store_a), (b, store_b) = whole, chunked
    assert a.result["chunk_count"] == 1
    assert b.result["chunk_count"] > 5
    assert a.relation_id_mapping == b.relation_id_mapping
    assert list(a.relation_id_mapping) == list(b.relation_id_mapping)  # input order
    assert a.relations == b.relations  # same relations, in the same (input) order
    assert a.relation_keys == b.relation_keys
    relation_files = {k: v for k, v in store_a.objects.items() if k.startswith("deduplicated_")}
    assert relation_files == {
        k: v for k, v in store_b.objects.items() if k.startswith("deduplicated_")
    }
    for key in SAME_KEYS:
        assert a.result[key] == b.result[key], key
    assert _issues(a) == _issues(b)
    for log in ("decisions.jsonl", "clarifications.jsonl", "rejected.jsonl"):
        assert _lines(store_a, log) == _lines(store_b, log), log


@needs_dev
async def test_rules_only_chunks_give_the_whole_batch_result() -> None:
    whole = await _run(NoLanguageModel(), 100_000)
    chunked = await _run(NoLanguageModel(), 40)
    assert whole[0].result["semantic_merge_count"] > 0
    assert whole[0].result["clarification_count"] > 0
    codes = {issue["code"] for issue in whole[0].result["issues"]}
    assert "possible_entity_duplicate" in codes  # the cross-block report spans chunks
    _assert_same(whole, chunked)


@needs_dev
async def test_llm_judged_chunks_give_the_whole_batch_result() -> None:
    gold, records = load_gold(DEV / "gold.jsonl"), labelled_relations(DEV / "gold.jsonl")
    # One question a request: packs are cut within a chunk, so they follow the chunking.
    # Canaries off: at 20% wrong the model's canary agreement sits at the 0.8 threshold,
    # where the chunk boundaries decide when it is distrusted (tests/run/test_canaries.py).
    judge = GoldJudge(gold, error_rate=0.2, records=records)
    whole = await _run(judge, 100_000, llm_pack_tokens=0, canaries=0)
    judge = GoldJudge(gold, error_rate=0.2, records=records)
    chunked = await _run(judge, 40, llm_pack_tokens=0, canaries=0)
    assert whole[0].result["llm_requests"] > 0
    _assert_same(whole, chunked)


@needs_dev
async def test_a_failing_chunk_stops_the_run_and_leaves_no_task_or_open_file() -> None:
    descriptors = set(os.listdir("/proc/self/fd"))
    with pytest.raises(ProviderError, match="401"):
        await _run(Refused(), 40)  # the first chunk with an LLM question fails
    assert asyncio.all_tasks() == {asyncio.current_task()}
    assert set(os.listdir("/proc/self/fd")) <= descriptors  # spool, logs, report closed
