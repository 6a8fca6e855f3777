"""A packed request that times out (``decide.pack``): its blocks ask alone, as they would
with packing off, instead of failing as ``llm_unavailable``; any other transport failure
of a pack still fails its blocks."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from relmerge.decide.retry import UNAVAILABLE, GroupFailed, ask_validated
from relmerge.errors import ProviderError
from relmerge.model import EntityContext
from relmerge.prompts import cluster_relations
from relmerge.providers.base import LLMRequest
from relmerge.providers.breaker import CircuitBreakerModel
from relmerge.providers.embedding import HashEmbedder
from relmerge.providers.fake import PACKED_TASK, ScriptedLLM
from relmerge.providers.openai_compat import OpenAICompatibleModel
from relmerge.run.result import RunOutput
from tests.decide.test_pack import EACH_BLOCK, LLM_ONLY, PACKED, RECORDS, groups, merge_each_block
from tests.factories import record, run_step
from tests.support.llm_server import LLMServer, Reply, body_task, json_reply, request_records

TIMEOUT = 0.5  # seconds a request may take
SLOW = 30.0  # how long the server takes over a packed request (cut short when it stops)
ALONE = ["relation_cluster", "relation_cluster", "relation_judge"]  # the blocks' questions


def timed_out(what: str = "packed") -> ProviderError:
    return ProviderError(
        f"{what}: APITimeoutError after 1 attempts",
        retryable=True,
        transport=True,
        timed_out=True,
    )


def refused() -> ProviderError:
    return ProviderError("APIConnectionError after 1 attempts", retryable=True, transport=True)


def slow_packs(body: dict[str, Any]) -> Reply:
    """A slow local model: a block's own question is answered at once, a packed one only
    after the request's timeout."""
    task = body_task(body)
    if task == PACKED_TASK:
        return Reply(content='{"blocks": []}', delay=SLOW)
    request = LLMRequest(task=task or "", messages=(), schema={})
    return json_reply(merge_each_block(request, request_records(body) or []))


def unavailable(output: RunOutput) -> list[str]:
    return [issue.code for issue in output.issues if issue.code == UNAVAILABLE]


def relations(output: RunOutput) -> list[dict[str, Any]]:
    return [relation.model_dump() for relation in output.relations]


async def run_on(server: LLMServer, **config: Any) -> RunOutput:
    llm = OpenAICompatibleModel(
        base_url=server.base_url,
        model="slow-cpu",
        timeout=TIMEOUT,
        max_retries=0,
        backoff_seconds=0.01,
    )
    try:
        output, _, _ = await run_step(RECORDS, llm, embedder=HashEmbedder(), **config)
    finally:
        await llm.aclose()
    return output


def canonical(bodies: list[dict[str, Any]]) -> list[bytes]:
    return sorted(orjson.dumps(body, option=orjson.OPT_SORT_KEYS) for body in bodies)


async def test_a_pack_that_times_out_over_http_asks_each_block_alone() -> None:
    """Through the real SDK and HTTP: the pack times out, each block then asks its own
    question, which is answered in time; the run is the one packing off would give,
    request for request."""
    with LLMServer(handler=slow_packs, per_block=False) as server:
        packed = await run_on(server, **PACKED, max_attempts=2)
        sent_packed = server.group_requests
        alone = await run_on(server, **LLM_ONLY, max_attempts=2)
        sent_alone = server.group_requests[len(sent_packed) :]
        assert server.errors == []
    tasks = [body_task(body) or "" for body in sent_packed]
    assert tasks[0] == PACKED_TASK and tasks.count(PACKED_TASK) == 1  # not asked again
    assert sorted(tasks[1:]) == ALONE  # then one request per block
    assert canonical(sent_packed[1:]) == canonical(sent_alone)  # as packing off asks them
    assert unavailable(packed) == [] and packed.issues == []
    assert packed.result["failed_group_count"] == 0
    assert packed.result["llm_unavailable_group_count"] == 0
    assert groups(packed.relation_id_mapping) == EACH_BLOCK
    assert packed.relation_id_mapping == alone.relation_id_mapping
    assert relations(packed) == relations(alone)


def pack_times_out(request: LLMRequest, records: list[dict[str, Any]]) -> Any:
    if request.task == PACKED_TASK:
        return timed_out()
    return merge_each_block(request, records)


@pytest.mark.parametrize("max_attempts", [1, 3])
async def test_a_timed_out_pack_costs_its_blocks_no_attempt_and_the_breaker_nothing(
    max_attempts: int,
) -> None:
    """The pack is asked once (a retry of the same pack would time out too), is not one of
    a block's ``max_attempts``, and does not count towards the circuit breaker: even a
    breaker that opens after one unanswered question lets every block ask alone."""
    llm = ScriptedLLM(pack_times_out, per_block=False)
    config = {**PACKED, "max_attempts": max_attempts, "llm_breaker_groups": 1}
    output, _, _ = await run_step(RECORDS, llm, embedder=HashEmbedder(), **config)
    tasks = [r.task for r in llm.requests]
    assert tasks[0] == PACKED_TASK and sorted(tasks[1:]) == ALONE
    assert output.issues == [] and output.result["failed_group_count"] == 0
    assert groups(output.relation_id_mapping) == EACH_BLOCK


async def test_blocks_that_time_out_alone_too_fail_alone_as_without_packing() -> None:
    """Each block of a timed-out pack asks alone once; timing out again, it fails as it
    would have with packing off: every block once, nothing decided twice, nothing lost."""

    def always_times_out(request: LLMRequest, records: list[dict[str, Any]]) -> Any:
        return timed_out(request.task)

    config: dict[str, Any] = {"max_attempts": 1, "llm_breaker_groups": 10}
    packed_llm = ScriptedLLM(always_times_out, per_block=False)
    alone_llm = ScriptedLLM(always_times_out, per_block=False)
    packed, _, _ = await run_step(RECORDS, packed_llm, embedder=HashEmbedder(), **PACKED, **config)
    alone, _, _ = await run_step(RECORDS, alone_llm, embedder=HashEmbedder(), **LLM_ONLY, **config)
    tasks = [r.task for r in packed_llm.requests]
    assert tasks[0] == PACKED_TASK and sorted(tasks[1:]) == ALONE
    assert sorted(r.task for r in alone_llm.requests) == ALONE
    assert unavailable(packed) == [UNAVAILABLE] * 3
    assert packed.result["llm_unavailable_group_count"] == 3
    assert packed.relation_id_mapping == alone.relation_id_mapping
    assert relations(packed) == relations(alone)
    assert sorted(r["relation_id"] for r in relations(packed)) == sorted(
        r["relation_id"] for r in RECORDS
    )


async def test_a_pack_refused_in_transport_still_fails_its_blocks() -> None:
    """An endpoint that refuses connections (no timeout): asking alone would only repeat
    the failure, so every block of the pack fails as ``llm_unavailable``, as before."""

    def pack_refused(request: LLMRequest, records: list[dict[str, Any]]) -> Any:
        if request.task == PACKED_TASK:
            return refused()
        return merge_each_block(request, records)

    llm = ScriptedLLM(pack_refused, per_block=False)
    output, _, _ = await run_step(RECORDS, llm, embedder=HashEmbedder(), **PACKED)
    assert {r.task for r in llm.requests} == {PACKED_TASK}  # no block asked alone
    assert unavailable(output) == [UNAVAILABLE] * 3
    assert output.result["llm_unavailable_group_count"] == 3


# ask_validated -------------------------------------------------------------------------


def cluster_request(feedback: list[tuple[str, str]]) -> LLMRequest:
    entities = (EntityContext("e1", "A"), EntityContext("e2", "B"))
    return cluster_relations.build_request(
        [record("r1"), record("r2")], entities, temperature=0.0, feedback=feedback
    )


def accept(parsed: Any) -> Any:
    return parsed


@pytest.mark.parametrize(
    ("failure", "expected"), [(timed_out, True), (refused, False)], ids=["timeout", "refused"]
)
async def test_a_question_no_attempt_of_which_was_answered_says_whether_it_timed_out(
    failure: Any, expected: bool
) -> None:
    breaker = CircuitBreakerModel(ScriptedLLM(lambda request, records: failure()), 10)
    with pytest.raises(GroupFailed) as caught:
        await ask_validated(breaker, cluster_request, accept, 2)
    assert caught.value.code == UNAVAILABLE
    assert caught.value.timed_out is expected
    assert breaker.unreachable_in_a_row == 1  # one question, reported once


async def test_split_on_timeout_ends_the_ask_at_the_first_timeout_unreported() -> None:
    inner = ScriptedLLM(lambda request, records: timed_out())
    breaker = CircuitBreakerModel(inner, 10)
    with pytest.raises(GroupFailed) as caught:
        await ask_validated(breaker, cluster_request, accept, 2, split_on_timeout=True)
    assert caught.value.code == UNAVAILABLE and caught.value.timed_out
    assert len(inner.requests) == 1
    assert breaker.unreachable_in_a_row == 0  # the smaller requests will count instead


async def test_split_on_timeout_leaves_other_transport_failures_as_they_were() -> None:
    inner = ScriptedLLM(lambda request, records: refused())
    breaker = CircuitBreakerModel(inner, 10)
    with pytest.raises(GroupFailed) as caught:
        await ask_validated(breaker, cluster_request, accept, 2, split_on_timeout=True)
    assert caught.value.code == UNAVAILABLE and not caught.value.timed_out
    assert len(inner.requests) == 2
    assert breaker.unreachable_in_a_row == 1
