"""The step contract where it is easy to get subtly wrong: merge counters, the bound on LLM
requests, where the logs go and what the step declares, and the smallest batch size."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import orjson
import pytest

from relmerge import DeduplicateRelations, DeduplicateRelationsConfig, DictContext
from relmerge.ids import merged_relation_id
from relmerge.providers.base import LLMRequest
from relmerge.providers.embedding import HashEmbedder
from relmerge.providers.fake import ScriptedLLM, merge_all, request_records
from relmerge.stores import MemoryStore
from tests.factories import record, run_step, store_with

# Rules decide less, so that the LLM path is exercised.
# The requests are the subject here: no canary records in them (tests/run/test_canaries.py).
LLM_ONLY: dict[str, Any] = {"auto_merge_cosine": None, "auto_keep_cosine": -1.0, "canaries": 0}


def _ids(records: list[dict[str, Any]]) -> list[str]:
    return [str(item["relation_id"]) for item in records]


def _map_all(request: LLMRequest, records: list[dict[str, Any]]) -> dict[str, Any]:
    if request.task == "relation_judge":
        existing = next(r for r in records if r["role"] == "existing")
        return {"verdict": "merge", "reason": "same", "duplicate_of": existing["relation_id"]}
    if request.task == "relation_merge":
        return merge_all(request, records)
    return {"mapping_table": {records[0]["relation_id"]: _ids(records)}}


# -- exact-key merges are exact merges, wherever they are decided ------------------------

EXACT_AND_SEMANTIC = [
    record("c1", description="Ada Lind has led Norrbeck as CEO since 2015."),
    record("c2", description="Ada Lind runs Norrbeck as its chief executive."),  # same key as c1
    record("c3", name="chief executive of", description="Ada Lind heads Norrbeck."),
]


@pytest.mark.parametrize("semantic", [True, False], ids=["semantic", "exact-only"])
async def test_exact_key_merges_count_as_exact_merges_even_inside_a_semantic_block(
    semantic: bool,
) -> None:
    llm = ScriptedLLM(_map_all)
    embedder = HashEmbedder() if semantic else None
    output, _, _ = await run_step(EXACT_AND_SEMANTIC, llm, embedder=embedder, **LLM_ONLY)
    result = output.result
    if semantic:
        # One relation_cluster request decided the exact-key pair (c1, c2) and c3 together.
        assert [request.task for request in llm.requests] == ["relation_cluster"]
        assert len(set(output.relation_id_mapping.values())) == 1
        assert (result["exact_merge_count"], result["semantic_merge_count"]) == (1, 1)
    else:
        assert [request.task for request in llm.requests] == ["relation_merge"]
        assert (result["exact_merge_count"], result["semantic_merge_count"]) == (1, 0)
    merged = result["input_relation_count"] - result["output_relation_count"]
    assert result["exact_merge_count"] + result["semantic_merge_count"] == merged


# -- max_attempts bounds the requests about one batch --------------------------------------


def _block(size: int) -> list[dict[str, Any]]:
    names = ["CEO of", "leads", "heads", "runs", "manages"]
    return [
        record(f"m{i}", name=names[i], description=f"Ada Lind is boss number {i} at Norrbeck.")
        for i in range(size)
    ]


@pytest.mark.parametrize("max_attempts", [1, 2, 3])
@pytest.mark.parametrize("size", [2, 3], ids=["judge", "cluster"])
async def test_a_block_whose_answers_are_all_invalid_gets_max_attempts_requests(
    max_attempts: int, size: int
) -> None:
    llm = ScriptedLLM(lambda request, items: "no idea")
    output, _, _ = await run_step(
        _block(size), llm, embedder=HashEmbedder(), max_attempts=max_attempts, **LLM_ONLY
    )
    assert len(llm.requests) == max_attempts
    assert output.result["llm_requests"] == max_attempts
    assert output.result["failed_group_count"] == 1
    if max_attempts > 1:  # the last attempt: a fresh request, records in another order
        first, last = llm.requests[0], llm.requests[-1]
        assert len(last.messages) == 2 and not last.relaxed
        first_ids, last_ids = _ids(_records(first)), _ids(_records(last))
        assert sorted(first_ids) == sorted(last_ids) and first_ids != last_ids


def _records(request: LLMRequest) -> list[dict[str, Any]]:
    return request_records(request)


@pytest.mark.parametrize("max_attempts", [1, 3])
async def test_an_exact_group_whose_answers_are_all_invalid_gets_max_attempts_requests(
    max_attempts: int,
) -> None:
    records = [record(f"g{i}", description=f"Ada Lind is boss number {i}.") for i in range(3)]
    llm = ScriptedLLM(lambda request, items: "no idea")
    output, _, _ = await run_step(records, llm, max_attempts=max_attempts)
    assert len(llm.requests) == max_attempts
    assert output.result["failed_group_count"] == 1
    assert output.relation_id_mapping == {f"g{i}": f"g{i}" for i in range(3)}


async def test_no_batch_of_a_large_block_gets_more_than_max_attempts_requests() -> None:
    """A block larger than one request: batches rotate across rounds, each re-asked once
    at most within its own max_attempts."""
    llm = ScriptedLLM(lambda request, items: "no idea")
    output, _, _ = await run_step(
        _block(5),
        llm,
        embedder=HashEmbedder(),
        max_attempts=2,
        semantic_batch_size=2,
        semantic_batch_count=4,
        **LLM_ONLY,
    )
    per_batch = Counter(frozenset(_ids(_records(request))) for request in llm.requests)
    assert per_batch and max(per_batch.values()) <= 2
    assert output.result["failed_group_count"] == 1
    assert output.result["llm_requests"] == len(llm.requests)


# -- the step writes its logs under a prefix naming the run, and declares every key ------


def _template_pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{relation_id\}|\{fingerprint\})", template)
    pattern = "".join(
        "[^/]+"
        if part == "{relation_id}"
        else "[0-9a-f]{16}"
        if part == "{fingerprint}"
        else re.escape(part)
        for part in parts
    )
    return re.compile(pattern)


async def _run_into(store: MemoryStore, keys: list[str], **config: Any) -> Any:
    step = DeduplicateRelations(DeduplicateRelationsConfig(semantic_merge=False, **config))
    context = DictContext(
        {"stores.objects": store, "models.language": ScriptedLLM(merge_all)},
        {"relation_keys": keys, "entity_id_mapping": {}},
    )
    return step, await step.run(context)


async def test_two_builds_sharing_a_store_keep_their_own_logs() -> None:
    first_batch = [record("a1"), record("a2"), record("a3", name="founded")]
    store, first_keys = store_with(first_batch)
    second_keys = []
    for item in [record("b1", description="Other."), record("b2", description="Another.")]:
        key = f"relations/{item['relation_id']}.json"
        store.objects[key] = orjson.dumps(item)
        second_keys.append(key)
    before = set(store.objects)

    step, first = await _run_into(store, first_keys)
    written_first = set(store.objects) - before
    logs_first = dict((key, store.objects[key]) for key in first.result["log_keys"])
    _, second = await _run_into(store, second_keys)

    fingerprints = {first.result["fingerprint"], second.result["fingerprint"]}
    assert len(fingerprints) == 2
    for output in (first, second):
        run = f"deduplicate_relations_runs/{output.result['fingerprint'][:16]}"
        assert output.result["log_keys"] == [
            f"{run}/decisions.jsonl",
            f"{run}/clarifications.jsonl",
            f"{run}/rejected.jsonl",
        ]
    # The second build left the first one's logs as they were, and wrote none at the root.
    assert all(store.objects[key] == data for key, data in logs_first.items())
    assert not {"decisions.jsonl", "clarifications.jsonl", "rejected.jsonl"} & set(store.objects)
    # Every key the step wrote matches one it declares.
    patterns = [_template_pattern(template) for template in step.capabilities.writes]
    assert step.capabilities.writes == (
        "deduplicated_relations/{relation_id}.json",
        "deduplicate_relations_runs/{fingerprint}/decisions.jsonl",
        "deduplicate_relations_runs/{fingerprint}/clarifications.jsonl",
        "deduplicate_relations_runs/{fingerprint}/rejected.jsonl",
    )
    assert written_first == set(first.relation_keys) | set(first.result["log_keys"])
    for key in set(store.objects) - before:
        assert any(pattern.fullmatch(key) for pattern in patterns), key


async def test_the_same_batch_again_is_the_same_run() -> None:
    store, keys = store_with([record("a1"), record("a2")])
    _, first = await _run_into(store, keys)
    _, again = await _run_into(store, keys, concurrency=2, logs_prefix="logs")
    assert again.result["fingerprint"] == first.result["fingerprint"]
    assert again.result["log_keys"][0] == f"logs/{first.result['fingerprint'][:16]}/decisions.jsonl"


async def test_logs_turned_off_are_neither_written_nor_declared() -> None:
    store, keys = store_with([record("a1"), record("a2")])
    before = set(store.objects)
    step, output = await _run_into(
        store, keys, decisions_key=None, clarifications_key=None, rejected_key=None
    )
    assert step.capabilities.writes == ("deduplicated_relations/{relation_id}.json",)
    assert output.result["log_keys"] == []
    assert set(store.objects) - before == set(output.relation_keys)


# -- llm_batch_size = 1: each later batch is the accumulated result plus one record ------


async def test_llm_batch_size_one_accumulates_one_record_at_a_time() -> None:
    records = [record(f"s{i}", description=f"Ada Lind leads Norrbeck, take {i}.") for i in range(4)]
    llm = ScriptedLLM(merge_all)
    output, _, _ = await run_step(records, llm, llm_batch_size=1)
    batches = [_ids(_records(request)) for request in llm.requests]
    accumulated = [merged_relation_id([f"s{j}" for j in range(i + 1)], "CEO of") for i in range(3)]
    assert batches == [["s0", "s1"], [accumulated[1], "s2"], [accumulated[2], "s3"]]
    assert len(set(output.relation_id_mapping.values())) == 1
    assert output.result["exact_merge_count"] == 3
