"""Fault injection: the dev set through a loopback LLM that misbehaves (issue 5, item 7).

An OpenAI-compatible server answers from the gold clusters, except that 30% of its answers
are garbage, 10% are HTTP 429, 5% HTTP 500, a few connections drop and every answer takes
a random moment. The run must complete, lose nothing, say in its issues which groups
failed and why, count every request it sent, and keep pair F1 within 0.05 of the
fault-free run. Focused tests take each fault alone. ``bench/soak_faults.py`` repeats the
comparison over many seeds.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.retry import EMPTY_ANSWER
from relmerge.errors import InvalidAnswerError
from relmerge.eval.gold_judge import GoldJudge
from relmerge.eval.metrics import evaluate
from relmerge.model import ExtractedRelation
from relmerge.prompts import cluster_relations, judge_pair, merge_relations
from relmerge.providers.parsing import parse_json_answer
from relmerge.run.result import RunOutput
from relmerge.stores import MemoryStore
from tests.factories import logged_clarifications, logged_decisions, record
from tests.support.faults import (
    DEV,
    FAULT_KINDS,
    GARBAGE_KINDS,
    DevSet,
    FaultRun,
    FaultyHandler,
    load_dev,
    lost_records,
    run_through_server,
    run_without_llm,
)
from tests.support.gold_judge import gold_task_handler
from tests.support.llm_server import Handler, Reply, json_reply

needs_dev = pytest.mark.skipif(not DEV.is_dir(), reason="shared dev set not present")

SEED = 0
MAX_RETRIES = 8  # transport retries per attempt: 429/500/drops almost never exhaust them
MAX_ATTEMPTS = 3  # the seed's default
HANG_GUARD_SECONDS = 300.0  # a hang fails the test instead of blocking CI; not a timing check

T = TypeVar("T")


async def guarded(run: Coroutine[Any, Any, T]) -> T:
    return await asyncio.wait_for(run, HANG_GUARD_SECONDS)


@pytest.fixture(scope="module")
def dev() -> DevSet:
    if not DEV.is_dir():
        pytest.skip("shared dev set not present")
    return load_dev()


@pytest.fixture(scope="module")
def clean(dev: DevSet) -> Iterator[FaultRun]:
    """The fault-free semantic run, shared by the focused tests."""
    yield asyncio.run(run_through_server(dev, gold(dev)))


def gold(dev: DevSet) -> Handler:
    return gold_task_handler(GoldJudge(dev.gold, records=dev.records))


def only(fault: str, rate: float = 1.0, **options: Any) -> dict[str, Any]:
    """FaultyHandler options that inject ``fault`` alone, with no latency."""
    rates: dict[str, Any] = {kind: 0.0 for kind in FAULT_KINDS}
    rates[fault] = rate
    return {**rates, "max_latency": 0.0, **options}


def failed_issues(output: RunOutput) -> list[dict[str, Any]]:
    return [issue for issue in output.result["issues"] if issue["code"] == "deduplication_failed"]


def assert_nothing_lost(run: FaultRun | RunOutput, dev: DevSet, store: Any = None) -> None:
    output, store = (run.output, run.store) if isinstance(run, FaultRun) else (run, store)
    assert lost_records(output, store, dev.records, dev.entity_mapping) == []
    assert output.result["input_relation_count"] == len(dev.records)
    assert output.result["output_relation_count"] == len(output.relations)


def assert_same_outputs(run: FaultRun, reference: FaultRun) -> None:
    assert run.output.relation_id_mapping == reference.output.relation_id_mapping
    assert run.output.relations == reference.output.relations
    assert failed_issues(run.output) == []


# The fault layer itself ----------------------------------------------------------------


def chat_body(task: str, ids: list[str]) -> dict[str, Any]:
    records = [record(relation_id) for relation_id in ids]
    fence = "```json\n" + json_reply(records).content + "\n```"
    return {
        "model": "m",
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": fence}],
        "response_format": {"type": "json_schema", "json_schema": {"name": task, "schema": {}}},
    }


def test_faults_follow_the_rates_and_the_seed_not_the_arrival_order() -> None:
    def answer(body: dict[str, Any]) -> Reply:
        return json_reply({"relation_list": [], "mapping_table": {}})

    def fate(reply: Reply) -> tuple[int, bool, str]:
        return reply.status, reply.drop, reply.content

    bodies = [chat_body("relation_cluster", [f"r{i}", f"r{i}b"]) for i in range(4000)]
    first = FaultyHandler(answer, max_latency=0.0, seed=7)
    fates = [fate(first(body)) for body in bodies]
    share = {kind: first.counts[kind] / len(bodies) for kind in (*FAULT_KINDS, "ok")}
    assert share["garbage"] == pytest.approx(0.30, abs=0.03)
    assert share["rate_limited"] == pytest.approx(0.10, abs=0.02)
    assert share["server_error"] == pytest.approx(0.05, abs=0.015)
    assert share["dropped"] == pytest.approx(0.02, abs=0.01)
    assert set(first.garbage_counts) == set(GARBAGE_KINDS)

    again = FaultyHandler(answer, max_latency=0.0, seed=7)
    assert [fate(again(body)) for body in reversed(bodies)][::-1] == fates
    assert again.counts == first.counts
    other = FaultyHandler(answer, max_latency=0.0, seed=8)
    assert [fate(other(body)) for body in bodies] != fates


def test_a_retry_of_the_same_question_draws_again() -> None:
    handler = FaultyHandler(lambda body: json_reply({}), **only("rate_limited", 0.5), seed=1)
    body = chat_body("relation_judge", ["a", "b"])
    statuses = {handler(body).status for _ in range(50)}
    assert statuses == {200, 429}
    assert list(handler.history) == ["relation_judge:a,b"]


def test_fault_rates_must_be_a_distribution() -> None:
    with pytest.raises(ValueError, match="sum to at most 1"):
        FaultyHandler(lambda body: Reply(), garbage=0.9, rate_limited=0.2)


def test_garbage_is_never_a_valid_answer() -> None:
    """Garbage must fail validation for every task, or a fault would pass as an answer."""
    records = [record("r1"), record("r2")]
    judge = GoldJudge({"r1": "c1", "r2": "c1"}, records=records)
    handler = FaultyHandler(gold_task_handler(judge), **only("garbage"), seed=3)
    relations = [ExtractedRelation.model_validate(item) for item in records]
    validators = {
        "relation_merge": lambda parsed: merge_relations.validate_answer(parsed, relations),
        "relation_cluster": lambda parsed: cluster_relations.validate_answer(parsed, records),
        "relation_judge": lambda parsed: judge_pair.validate_answer(parsed, ["r1"]),
    }
    for task, validate in validators.items():
        body = chat_body(task, ["r1", "r2"])
        if task == "relation_judge":
            body["messages"][1]["content"] = (
                "```json\n"
                + json_reply(
                    [{**records[0], "role": "existing"}, {**records[1], "role": "candidate"}]
                ).content
                + "\n```"
            )
        for _ in range(60):
            reply = handler(body)
            assert reply.status == 200
            parsed = parse_json_answer(reply.content)
            if parsed is not None:
                with pytest.raises(InvalidAnswerError):
                    validate(parsed)
    assert set(handler.garbage_counts) == set(GARBAGE_KINDS)


# The dev set under the whole fault mix ---------------------------------------------------


@needs_dev
@pytest.mark.parametrize("semantic", [True, False], ids=["semantic", "exact-only"])
async def test_dev_set_under_the_fault_mix(dev: DevSet, semantic: bool) -> None:
    reference = await guarded(run_through_server(dev, gold(dev), semantic=semantic))
    faults = FaultyHandler(gold(dev), seed=SEED)  # 30% garbage, 10% 429, 5% 500, 2% drops
    faulty = await guarded(
        run_through_server(
            dev, faults, semantic=semantic, max_retries=MAX_RETRIES, max_attempts=MAX_ATTEMPTS
        )
    )

    # The fault-free run is the yardstick: complete, nothing lost, no failure.
    assert_nothing_lost(reference, dev)
    assert failed_issues(reference.output) == []
    assert reference.output.result["llm_requests"] == reference.server_requests > 0

    # Every kind of fault was injected (the draws are fixed by SEED: if a change to the
    # pipeline's batching leaves a kind out, pick another seed).
    assert all(faults.counts[kind] > 0 for kind in FAULT_KINDS), faults.counts
    assert faults.max_latency > 0

    # The run completed and lost nothing.
    assert_nothing_lost(faulty, dev)
    assert faulty.output.rejected == []

    # Accounting: every request sent is counted, and every transport failure as failed;
    # garbage answers are requests that succeeded at the HTTP level.
    result = faulty.output.result
    assert result["llm_requests"] == faulty.server_requests == faults.counts.total()
    transport = sum(faults.counts[kind] for kind in ("rate_limited", "server_error", "dropped"))
    assert result["llm_failed_requests"] == transport
    assert result["llm_invalid_answers"] == faults.counts["garbage"]
    assert result["llm_requests"] > reference.output.result["llm_requests"]

    # Issues say what happened: one per question that never got a valid answer within
    # max_attempts, replayed from what the server sent, each with the last reason.
    issues = failed_issues(faulty.output)
    expected = faults.unanswered_questions(MAX_RETRIES, MAX_ATTEMPTS)
    assert len(issues) == result["failed_group_count"] == expected
    subject = "dedup_block" if semantic else "dedup_group"
    resolution = "kept_tier_decisions" if semantic else "kept_original_records"
    for issue in issues:
        assert issue["severity"] == "warning"
        assert issue["subject"]["type"] == subject
        assert issue["resolution"]["action"] == resolution
        assert issue["message"].strip()
        assert "endpoint failed" not in issue["message"]  # garbage, not transport, failed it
    failed_decisions = [d for d in logged_decisions(faulty.store) if d.verdict == "failed"]
    if not semantic:
        assert len(failed_decisions) == len(issues)
        for decision in failed_decisions:  # the group kept its original records
            assert decision.reason
            assert decision.output_ids == decision.member_ids

    # Garbage, 429s and retried transport faults never open the circuit breaker.
    assert result["llm_circuit_breaker"]["open"] is False
    assert result["llm_unavailable_group_count"] == 0

    # Quality stays close to the fault-free run.
    f1_reference = evaluate(reference.output.relation_id_mapping, dev.gold).pair_f1
    f1_faulty = evaluate(faulty.output.relation_id_mapping, dev.gold).pair_f1
    assert abs(f1_faulty - f1_reference) <= 0.05, (f1_reference, f1_faulty)


# Each fault alone -------------------------------------------------------------------------


@needs_dev
async def test_a_burst_of_429_then_recovery_changes_nothing(dev: DevSet, clean: FaultRun) -> None:
    burst = 30
    faults = FaultyHandler(gold(dev), **only("rate_limited", max_faults=burst))
    run = await guarded(run_through_server(dev, faults, max_retries=burst))
    assert faults.counts["rate_limited"] == burst
    assert_same_outputs(run, clean)
    result = run.output.result
    assert result["llm_failed_requests"] == burst
    assert result["llm_requests"] == clean.output.result["llm_requests"] + burst
    assert result["llm_requests"] == run.server_requests


@needs_dev
async def test_dropped_connections_are_retried(dev: DevSet, clean: FaultRun) -> None:
    faults = FaultyHandler(gold(dev), **only("dropped", 0.3), seed=SEED)
    run = await guarded(run_through_server(dev, faults))
    assert faults.counts["dropped"] > 0
    assert_same_outputs(run, clean)
    assert run.output.result["llm_failed_requests"] == faults.counts["dropped"]
    assert run.output.result["llm_requests"] == run.server_requests


@needs_dev
async def test_answers_slower_than_the_timeout_are_retried(dev: DevSet, clean: FaultRun) -> None:
    slow = [Reply(delay=5.0, content="too late")] * 3
    run = await guarded(run_through_server(dev, gold(dev), timeout=0.5, queued=slow))
    assert_same_outputs(run, clean)
    assert run.output.result["llm_failed_requests"] == len(slow)
    assert run.output.result["llm_requests"] == run.server_requests


def unavailable_issues(output: RunOutput) -> list[dict[str, Any]]:
    return [issue for issue in output.result["issues"] if issue["code"] == "llm_unavailable"]


@needs_dev
@pytest.mark.parametrize("semantic", [True, False], ids=["semantic", "exact-only"])
async def test_server_errors_beyond_the_retries_open_the_circuit_breaker(
    dev: DevSet, semantic: bool
) -> None:
    """An endpoint that only answers 500: the first questions fail every attempt, then the
    breaker stops the sending; every group left keeps what the rules decide, with the
    issue ``llm_unavailable``, and its undecided pairs are written for review as a run
    without an LLM writes them."""
    faults = FaultyHandler(gold(dev), **only("server_error"))
    run = await guarded(
        run_through_server(dev, faults, semantic=semantic, max_retries=1, max_attempts=2)
    )
    assert_nothing_lost(run, dev)
    result = run.output.result
    breaker = result["llm_circuit_breaker"]
    assert breaker["open"] is True and breaker["after_groups"] == 5
    assert breaker["refused_requests"] > 0  # the groups after it sent nothing
    questions = len(faults.history)
    concurrency = DeduplicateRelationsConfig().concurrency
    # The five questions that tripped it, and at most the others already in flight.
    assert 5 <= questions <= 5 + concurrency
    # 2 attempts of 2 HTTP requests each for a question that ran to its end; fewer for
    # one in flight when the breaker opened (its next attempt is refused). Every request
    # sent is counted.
    assert result["llm_requests"] == result["llm_failed_requests"] == run.server_requests
    assert run.server_requests <= 4 * questions
    # No group failed on anything but the endpoint; each one left has its issue.
    issues = unavailable_issues(run.output)
    assert failed_issues(run.output) == []
    assert len(issues) == result["failed_group_count"] == result["llm_unavailable_group_count"]
    assert len(issues) > questions  # groups after the breaker opened are reported too
    assert all(issue["message"] for issue in issues)
    # What is kept is exactly what the rules decide without an LLM, and the questions for
    # a person are those of a run without one.
    rules_store = MemoryStore()
    rules = await run_without_llm(dev, semantic=semantic, store=rules_store)
    assert run.output.relation_id_mapping == rules.relation_id_mapping
    asked = {item["id"] for item in logged_clarifications(run.store)}
    assert asked == {item["id"] for item in logged_clarifications(rules_store)}
    assert bool(asked) == semantic  # the exact stage writes decisions, not questions
    if semantic:
        reasons = {item["reason"] for item in logged_clarifications(run.store)}
        assert all(reason.startswith("the LLM was unavailable") for reason in reasons)


@needs_dev
async def test_an_endpoint_that_dies_mid_run_stops_being_asked(dev: DevSet) -> None:
    """The gold judge answers the first questions, then every connection drops: the
    answers it gave are used, the breaker stops the sending, nothing is lost."""
    inner = gold(dev)
    alive_for = 10
    seen = 0
    lock = threading.Lock()

    def dies(body: dict[str, Any]) -> Reply:
        nonlocal seen
        with lock:
            seen += 1
            alive = seen <= alive_for
        return inner(body) if alive else Reply(drop=True)

    run = await guarded(run_through_server(dev, dies, max_retries=1, max_attempts=2))
    assert_nothing_lost(run, dev)
    result = run.output.result
    assert result["llm_circuit_breaker"]["open"] is True
    after_death = run.server_requests - alive_for
    concurrency = DeduplicateRelationsConfig().concurrency
    # Five questions in a row without an answer trip it (2 attempts of 2 requests each);
    # an answer sent before the death and received after some of them restarts the count,
    # at most once per request in flight.
    assert 0 < after_death <= 4 * (5 + 5 * concurrency)
    assert result["llm_circuit_breaker"]["refused_requests"] > 0
    assert result["llm_unavailable_group_count"] > 0
    assert failed_issues(run.output) == []
    # The answers that came back before it died are applied.
    assert any(d.tier == "llm" for d in logged_decisions(run.store))
    assert logged_clarifications(run.store)


@needs_dev
@pytest.mark.parametrize("semantic", [True, False], ids=["semantic", "exact-only"])
async def test_garbage_only_fails_every_question_with_its_reason(
    dev: DevSet, semantic: bool
) -> None:
    faults = FaultyHandler(gold(dev), **only("garbage"), seed=SEED)
    run = await guarded(run_through_server(dev, faults, semantic=semantic))
    assert_nothing_lost(run, dev)
    result = run.output.result
    questions = len(faults.history)
    assert result["failed_group_count"] == questions == faults.unanswered_questions(8, 3)
    # max_attempts requests per question; the semantic stage's last one re-asks a block
    # in a fresh request, records in another order.
    assert result["llm_requests"] == run.server_requests == MAX_ATTEMPTS * questions
    assert result["llm_failed_requests"] == 0  # every answer arrived; none was usable
    assert result["llm_invalid_answers"] == MAX_ATTEMPTS * questions
    # Retries carry the invalid answer back with what was wrong; never an empty turn.
    retries = [body for body in run.requests if len(body["messages"]) > 2]
    assert len(retries) == (MAX_ATTEMPTS - (2 if semantic else 1)) * questions
    for body in retries:
        answers = [m["content"] for m in body["messages"] if m["role"] == "assistant"]
        assert answers
        assert all(answer.strip() for answer in answers)
        assert "invalid" in body["messages"][-1]["content"]
    reasons = {issue["message"] for issue in failed_issues(run.output)}
    assert "LLM output is not valid JSON." in reasons
    # Invalid answers never trip the circuit breaker: every question was asked.
    assert result["llm_circuit_breaker"]["open"] is False
    assert unavailable_issues(run.output) == []
    rules = await run_without_llm(dev, semantic=semantic)
    assert run.output.relation_id_mapping == rules.relation_id_mapping


@needs_dev
async def test_an_empty_answer_does_not_stop_the_run_on_a_strict_server(
    dev: DevSet, clean: FaultRun
) -> None:
    """Some servers (Mistral, gateways to Anthropic models) 400 an empty assistant turn.

    The retry of an empty answer must not send one: a 400 is not retryable and would stop
    the whole run instead of failing one attempt.
    """
    inner = gold(dev)

    def strict(body: dict[str, Any]) -> Reply:
        for message in body["messages"]:
            if message["role"] == "assistant" and not str(message.get("content") or "").strip():
                return Reply(status=400, body={"error": {"message": "empty assistant content"}})
        return inner(body)

    run = await guarded(run_through_server(dev, strict, queued=[Reply(content="")]))
    assert_same_outputs(run, clean)
    assert any(
        message["role"] == "assistant" and message["content"] == EMPTY_ANSWER
        for body in run.requests
        for message in body["messages"]
    )
