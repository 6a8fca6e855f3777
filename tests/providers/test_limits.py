"""Budgets and the request rate: a spent budget ends LLM use, never the run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from relmerge.errors import BudgetExhaustedError, ProviderError
from relmerge.providers.base import LLMRequest, Message
from relmerge.providers.fake import ScriptedLLM, merge_all
from relmerge.providers.limits import BudgetModel, RateLimitedModel
from tests.factories import record, run_step

REQUEST = LLMRequest("relation_merge", (Message("user", "x"),), {"type": "object"})


async def test_the_request_budget_counts_retries_and_refuses_before_sending() -> None:
    inner = ScriptedLLM([ProviderError("down", retryable=True, attempts=3), "{}", "{}"])
    model = BudgetModel(inner, max_requests=4, max_tokens=None)
    with pytest.raises(ProviderError):
        await model.invoke(REQUEST)
    await model.invoke(REQUEST)
    assert model.sent == 4 and not model.exhausted
    with pytest.raises(BudgetExhaustedError, match="4 requests"):
        await model.invoke(REQUEST)
    assert len(inner.requests) == 2 and model.exhausted


async def test_the_token_budget_stops_once_reached() -> None:
    inner = ScriptedLLM(lambda request, records: '{"long": "' + "x" * 400 + '"}')
    model = BudgetModel(inner, max_requests=None, max_tokens=150)
    await model.invoke(REQUEST)  # about 100 completion tokens
    await model.invoke(REQUEST)
    with pytest.raises(BudgetExhaustedError, match="150 tokens"):
        await model.invoke(REQUEST)
    assert len(inner.requests) == 2


async def test_requests_in_flight_count_against_the_budget() -> None:
    release = asyncio.Event()

    class Slow(ScriptedLLM):
        async def invoke(self, request: LLMRequest) -> Any:
            await release.wait()
            return await super().invoke(request)

    model = BudgetModel(Slow(lambda request, records: "{}"), max_requests=2, max_tokens=None)
    started = [asyncio.create_task(model.invoke(REQUEST)) for _ in range(2)]
    await asyncio.sleep(0)
    with pytest.raises(BudgetExhaustedError):
        await model.invoke(REQUEST)
    release.set()
    await asyncio.gather(*started)
    assert model.sent == 2


async def test_a_spent_budget_keeps_the_remaining_groups_and_records_issues() -> None:
    records = [
        record(f"r{group}{i}", name=f"role {group}", description=f"Text {group}.{i}")
        for group in range(4)
        for i in range(2)
    ]
    llm = ScriptedLLM(merge_all)
    output, _, _ = await run_step(records, llm, max_llm_requests=1)
    assert len(llm.requests) == 1
    result = output.result
    assert result["llm_requests"] == 1
    assert result["llm_budget"] == {"max_requests": 1, "max_tokens": None, "exhausted": True}
    assert result["exact_merge_count"] == 1
    assert result["failed_group_count"] == 3
    spent = [issue for issue in result["issues"] if issue["code"] == "llm_budget_exhausted"]
    assert len(spent) == 3
    assert all("budget is spent" in issue["message"] for issue in spent)
    assert all(issue["resolution"]["action"] == "kept_original_records" for issue in spent)
    assert set(output.relation_id_mapping) == {item["relation_id"] for item in records}
    assert len(output.relations) == 7


async def test_a_zero_budget_is_rules_only_and_still_complete() -> None:
    records = [record("a", description="Same."), record("b", description="same."), record("c")]
    llm = ScriptedLLM([])
    output, _, _ = await run_step(records, llm, max_llm_requests=0)
    assert llm.requests == []
    assert output.relation_id_mapping["a"] == output.relation_id_mapping["b"]  # identical text
    assert output.relation_id_mapping["c"] == "c"
    assert output.result["failed_group_count"] == 1


async def test_the_rate_limiter_holds_requests_beyond_the_per_minute_amount() -> None:
    inner = ScriptedLLM(lambda request, records: "{}")
    model = RateLimitedModel(inner, requests_per_minute=2)
    await model.invoke(REQUEST)
    await model.invoke(REQUEST)
    with pytest.raises(TimeoutError):  # the third would start about 30 s later
        await asyncio.wait_for(model.invoke(REQUEST), timeout=0.5)
    assert len(inner.requests) == 2
