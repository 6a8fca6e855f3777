"""``OpenAICompatibleModel`` against a real HTTP server on 127.0.0.1 (no SDK or httpx mocks)."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import AsyncIterator, Callable
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from relmerge.config import DeduplicateRelationsConfig, ResponseFormat
from relmerge.errors import ProviderError
from relmerge.model import ExtractedRelation
from relmerge.prompts import merge_relations
from relmerge.providers import openai_compat
from relmerge.providers.accounting import AccountingModel
from relmerge.providers.base import LLMRequest
from relmerge.providers.openai_compat import OpenAICompatibleModel
from relmerge.stages.llm_merge import GroupFailed, ask_merge
from relmerge.units import Unit
from tests.support.llm_server import (
    CHAT_PATH,
    LLMServer,
    Reply,
    json_reply,
    merge_first_handler,
    request_records,
)

API_KEY = "sk-test-7f3a9c41e2b8d05a"


def relation(relation_id: str, description: str) -> ExtractedRelation:
    return ExtractedRelation(
        relation_id=relation_id,
        chunk_id=f"chunk_{relation_id}",
        document_id="doc_1",
        source_entity_id="e_norrbeck",
        target_entity_id="e_ada",
        source_entity_name="Norrbeck Systems",
        target_entity_name="Ada Lind",
        type="employment",
        name="CEO of",
        description=description,
        attributes={"since": "2019"},
        source_chunk_ids=[f"chunk_{relation_id}"],
    )


RELATIONS = [
    relation("r1", "Ada Lind has been CEO of Norrbeck Systems since 2019."),
    relation("r2", "Norrbeck's chief executive is Ada Lind."),
]
MERGED = {
    "relation": {
        "type": "employment",
        "name": "CEO of",
        "description": "Ada Lind has been CEO of Norrbeck Systems since 2019.",
        "attributes": {"since": "2019"},
    }
}


def merge_request(temperature: float = 0.0) -> LLMRequest:
    return merge_relations.build_request(RELATIONS, temperature=temperature, description_chars=2000)


ModelFactory = Callable[..., OpenAICompatibleModel]


@pytest.fixture
async def make_model(llm_server: LLMServer) -> AsyncIterator[ModelFactory]:
    """Builds models on the test server; their HTTP clients are closed after the test."""
    models: list[OpenAICompatibleModel] = []

    def build(**options: Any) -> OpenAICompatibleModel:
        options.setdefault("model", "fake-llm")
        options.setdefault("backoff_seconds", 0.01)
        options.setdefault("timeout", 5.0)
        model = OpenAICompatibleModel(base_url=llm_server.base_url, **options)
        models.append(model)
        return model

    yield build
    for model in models:
        await model._client.close()


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Backoff delays the provider asks for; the provider then only yields (no real wait).

    Only the ``asyncio`` name inside ``openai_compat`` is replaced: the SDK and httpx are real.
    """
    recorded: list[float] = []
    real_sleep = asyncio.sleep

    async def record(delay: float) -> None:
        recorded.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(openai_compat, "asyncio", SimpleNamespace(sleep=record))
    return recorded


# Request shape ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (
            "json_schema",
            {
                "type": "json_schema",
                "json_schema": {"name": merge_relations.TASK, "schema": merge_relations.SCHEMA},
            },
        ),
        ("json_object", {"type": "json_object", "schema": merge_relations.SCHEMA}),
        ("none", None),
    ],
)
async def test_request_shape_follows_the_response_format_mode(
    llm_server: LLMServer,
    make_model: ModelFactory,
    mode: ResponseFormat,
    expected: dict[str, Any] | None,
) -> None:
    llm_server.enqueue(json_reply(MERGED))
    model = make_model(model="qwen2.5-7b", response_format=mode)

    await model.invoke(merge_request(temperature=0.3))

    (received,) = llm_server.received
    assert (received.method, received.path) == ("POST", CHAT_PATH)
    (body,) = llm_server.requests
    assert body["model"] == "qwen2.5-7b"
    assert body["temperature"] == 0.3
    assert body["messages"] == [message.to_dict() for message in merge_request().messages]
    assert [message["role"] for message in body["messages"]] == ["system", "user"]
    if expected is None:
        assert "response_format" not in body
    else:
        assert body["response_format"] == expected
    assert set(body) <= {"model", "messages", "temperature", "response_format", "max_tokens"}
    assert isinstance(body["max_tokens"], int) and body["max_tokens"] > 0


async def test_user_message_carries_the_records_as_a_fenced_json_array(
    llm_server: LLMServer,
    make_model: ModelFactory,
) -> None:
    llm_server.enqueue(json_reply(MERGED))
    await make_model().invoke(merge_request())

    (body,) = llm_server.requests
    user = next(message["content"] for message in body["messages"] if message["role"] == "user")
    block = user.split("```json\n", 1)[1].rsplit("\n```", 1)[0]
    records = orjson.loads(block)
    assert isinstance(records, list)
    assert [record["relation_id"] for record in records] == ["r1", "r2"]
    assert records[1]["description"] == "Norrbeck's chief executive is Ada Lind."
    assert request_records(body) == records


async def test_authorization_header_carries_the_constructor_key(
    llm_server: LLMServer, make_model: ModelFactory
) -> None:
    llm_server.enqueue(json_reply(MERGED))
    await make_model(api_key=API_KEY).invoke(merge_request())

    (headers,) = llm_server.headers
    assert headers["authorization"] == f"Bearer {API_KEY}"


# Answers ----------------------------------------------------------------------------------


async def test_fenced_answer_is_parsed(llm_server: LLMServer, make_model: ModelFactory) -> None:
    text = "Here is the merge:\n```json\n" + orjson.dumps(MERGED).decode() + "\n```\nDone."
    llm_server.enqueue(Reply(content=text))

    result = await make_model().invoke(merge_request())

    assert result.text == text
    assert result.parsed == MERGED
    assert result.attempts == 1


async def test_garbage_answer_keeps_the_text_and_parses_to_none(
    llm_server: LLMServer, make_model: ModelFactory
) -> None:
    text = "I am sorry, I cannot merge these { relations"
    llm_server.enqueue(Reply(content=text))

    result = await make_model().invoke(merge_request())

    assert result.parsed is None
    assert result.text == text


async def test_usage_and_model_come_from_the_response(
    llm_server: LLMServer, make_model: ModelFactory
) -> None:
    llm_server.enqueue(json_reply(MERGED, prompt_tokens=321, completion_tokens=54))

    result = await make_model(model="served-model").invoke(merge_request())

    assert result.usage.prompt_tokens == 321
    assert result.usage.completion_tokens == 54
    assert result.usage.total_tokens == 375
    assert result.model == "served-model"


# Retries ----------------------------------------------------------------------------------


async def test_rate_limit_then_success_is_retried(
    llm_server: LLMServer, make_model: ModelFactory
) -> None:
    llm_server.enqueue(Reply(status=429), json_reply(MERGED))

    result = await make_model(max_retries=2).invoke(merge_request())

    assert result.parsed == MERGED
    assert result.attempts == 2
    assert len(llm_server.requests) == 2
    assert llm_server.requests[0] == llm_server.requests[1]


async def test_retry_after_zero_is_honoured(
    llm_server: LLMServer, make_model: ModelFactory
) -> None:
    # Without the header the backoff would be 30 s (the cap); the guard turns that into a failure.
    llm_server.enqueue(Reply(status=429, headers={"Retry-After": "0"}), json_reply(MERGED))
    model = make_model(max_retries=1, backoff_seconds=100.0)

    result = await asyncio.wait_for(model.invoke(merge_request()), timeout=10)

    assert result.attempts == 2
    assert result.parsed == MERGED


@pytest.mark.parametrize(("header", "expected"), [("7", 7.0), ("0", 0.0), ("3600", 30.0)])
async def test_retry_after_sets_the_delay_up_to_the_cap(
    llm_server: LLMServer,
    make_model: ModelFactory,
    sleeps: list[float],
    header: str,
    expected: float,
) -> None:
    llm_server.enqueue(Reply(status=503, headers={"Retry-After": header}), json_reply(MERGED))

    result = await make_model(max_retries=1, backoff_seconds=5.0).invoke(merge_request())

    assert result.attempts == 2
    assert sleeps == [expected]


async def test_backoff_doubles_with_jitter_without_retry_after(
    llm_server: LLMServer, make_model: ModelFactory, sleeps: list[float]
) -> None:
    llm_server.enqueue(Reply(status=500), Reply(status=502), Reply(status=429), json_reply(MERGED))

    result = await make_model(max_retries=3, backoff_seconds=2.0).invoke(merge_request())

    assert result.attempts == 4
    assert len(sleeps) == 3
    for attempt, delay in enumerate(sleeps):
        base = 2.0 * 2**attempt
        assert 0.5 * base <= delay <= 1.5 * base


async def test_server_errors_beyond_max_retries_raise_a_retryable_error(
    llm_server: LLMServer,
    make_model: ModelFactory,
) -> None:
    llm_server.handler = lambda body: Reply(status=500)
    model = make_model(max_retries=2)

    with pytest.raises(ProviderError) as caught:
        await model.invoke(merge_request())

    assert caught.value.retryable is True
    assert caught.value.attempts == 3
    assert len(llm_server.requests) == 3
    assert "500" in str(caught.value)
    assert caught.value.transport is True
    assert caught.value.timed_out is False


async def test_unauthorized_fails_at_once_without_leaking_the_key(
    llm_server: LLMServer, make_model: ModelFactory
) -> None:
    llm_server.enqueue(Reply(status=401))
    model = make_model(api_key=API_KEY, max_retries=3)

    with pytest.raises(ProviderError) as caught:
        await model.invoke(merge_request())

    assert caught.value.retryable is False
    assert caught.value.attempts == 1
    assert len(llm_server.requests) == 1
    assert "401" in str(caught.value)
    assert API_KEY not in str(caught.value)
    assert API_KEY not in repr(caught.value)
    assert API_KEY not in repr(model)


async def test_unauthorized_error_that_echoes_the_key_is_redacted(
    llm_server: LLMServer, make_model: ModelFactory
) -> None:
    # Some gateways quote the key they rejected; the message must still not carry it.
    def echo_key(body: dict[str, Any]) -> Reply:
        (headers,) = llm_server.headers
        key = headers["authorization"].removeprefix("Bearer ")
        message = f"Incorrect API key provided: {key}"
        return Reply(status=401, body={"error": {"message": message, "type": "auth"}})

    llm_server.handler = echo_key
    model = make_model(api_key=API_KEY)

    with pytest.raises(ProviderError) as caught:
        await model.invoke(merge_request())

    assert caught.value.retryable is False
    assert "Incorrect API key provided" in str(caught.value)
    assert API_KEY not in str(caught.value)


@pytest.mark.parametrize("status", [400, 404, 422])
async def test_client_errors_are_not_retried(
    llm_server: LLMServer, make_model: ModelFactory, status: int
) -> None:
    llm_server.handler = lambda body: Reply(status=status)

    with pytest.raises(ProviderError) as caught:
        await make_model(max_retries=3).invoke(merge_request())

    assert caught.value.retryable is False
    assert caught.value.attempts == 1
    assert len(llm_server.requests) == 1


async def test_slow_answer_times_out_is_retried_then_fails(
    llm_server: LLMServer, make_model: ModelFactory
) -> None:
    llm_server.handler = lambda body: json_reply(MERGED, delay=1.0)
    model = make_model(timeout=0.2, max_retries=1)

    with pytest.raises(ProviderError) as caught:
        await model.invoke(merge_request())

    assert caught.value.retryable is True
    assert caught.value.attempts == 2
    assert "Timeout" in str(caught.value)
    assert len(llm_server.requests) == 2
    assert caught.value.transport is True
    assert caught.value.timed_out is True  # a smaller request may be answered in time


async def test_slow_answer_then_fast_one_succeeds(
    llm_server: LLMServer, make_model: ModelFactory
) -> None:
    llm_server.enqueue(json_reply(MERGED, delay=1.0), json_reply(MERGED))

    result = await make_model(timeout=0.2, max_retries=1).invoke(merge_request())

    assert result.attempts == 2
    assert result.parsed == MERGED


async def test_dropped_connection_is_retried(
    llm_server: LLMServer, make_model: ModelFactory
) -> None:
    llm_server.enqueue(Reply(drop=True), json_reply(MERGED))

    result = await make_model(max_retries=1).invoke(merge_request())

    assert result.attempts == 2
    assert result.parsed == MERGED
    assert len(llm_server.requests) == 2


async def test_connection_dropped_every_time_raises_a_retryable_error(
    llm_server: LLMServer,
    make_model: ModelFactory,
) -> None:
    llm_server.handler = lambda body: Reply(drop=True)

    with pytest.raises(ProviderError) as caught:
        await make_model(max_retries=2).invoke(merge_request())

    assert caught.value.retryable is True
    assert caught.value.attempts == 3
    assert len(llm_server.requests) == 3
    assert caught.value.timed_out is False


async def test_ok_status_with_a_non_json_body_is_a_provider_error(
    llm_server: LLMServer, make_model: ModelFactory
) -> None:
    # A proxy or a wrong base_url answering 200 with something that is not JSON.
    llm_server.enqueue(Reply(body=b"<html>502 Bad Gateway</html>"))

    with pytest.raises(ProviderError) as caught:
        await make_model(max_retries=3).invoke(merge_request())

    assert caught.value.retryable is False
    assert caught.value.attempts == 1


async def test_after_a_good_answer_a_stray_error_page_is_retried(
    llm_server: LLMServer, make_model: ModelFactory
) -> None:
    """Mid-run, a proxy's error page is one request's bad luck, not a wrong base URL."""
    model = make_model(max_retries=3)
    llm_server.enqueue(json_reply(MERGED))
    await model.invoke(merge_request())
    llm_server.enqueue(Reply(body=b"<html>502 Bad Gateway</html>"), Reply(body={"id": "x"}))
    llm_server.enqueue(json_reply(MERGED))

    result = await model.invoke(merge_request())

    assert result.parsed == MERGED and result.attempts == 3
    llm_server.handler = lambda body: Reply(body=b"<html>down</html>")
    with pytest.raises(ProviderError) as caught:
        await model.invoke(merge_request())
    assert caught.value.retryable is True and caught.value.attempts == 4


@pytest.mark.parametrize("status", [400, 413, 422])
async def test_a_rejected_request_stops_the_run_only_before_any_good_answer(
    llm_server: LLMServer, make_model: ModelFactory, status: int
) -> None:
    """First request refused: a misconfiguration (stop). Later: that request's problem
    (e.g. too long for the context), so only its group fails."""
    model = make_model(max_retries=3)
    llm_server.enqueue(Reply(status=status))
    with pytest.raises(ProviderError) as first:
        await model.invoke(merge_request())
    assert first.value.retryable is False

    llm_server.enqueue(json_reply(MERGED), Reply(status=status))
    await model.invoke(merge_request())
    with pytest.raises(ProviderError) as later:
        await model.invoke(merge_request())
    assert later.value.retryable is True and later.value.attempts == 1
    llm_server.enqueue(Reply(status=401))
    with pytest.raises(ProviderError) as auth:
        await model.invoke(merge_request())
    assert auth.value.retryable is False  # a bad key is never one request's problem


# Accounting through ask_merge -------------------------------------------------------------


def units() -> list[Unit]:
    return [Unit(item, (index,)) for index, item in enumerate(RELATIONS)]


async def test_ask_merge_counts_every_request_sent(
    llm_server: LLMServer, make_model: ModelFactory
) -> None:
    llm_server.enqueue(
        Reply(status=429, headers={"Retry-After": "0"}),
        Reply(content="not json at all", prompt_tokens=100, completion_tokens=5),
        json_reply(MERGED, prompt_tokens=120, completion_tokens=30),
    )
    llm = AccountingModel(make_model(max_retries=2))

    parts, result = await ask_merge(llm, units(), DeduplicateRelationsConfig(max_attempts=3))

    assert [part.relation_ids for part in parts] == [("r1", "r2")]
    assert parts[0].fields["description"] == MERGED["relation"]["description"]
    assert result.attempts == 1
    assert llm.stats.requests == 3 == len(llm_server.requests)
    assert llm.stats.failed_requests == 1
    assert llm.stats.tokens() == {"prompt": 220, "completion": 35, "total": 255}
    # The third request tells the model what was wrong with its previous answer.
    roles = [message["role"] for message in llm_server.requests[2]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert llm_server.requests[2]["messages"][2]["content"] == "not json at all"


async def test_ask_merge_gives_up_on_a_failing_endpoint_and_counts_it(
    llm_server: LLMServer,
    make_model: ModelFactory,
) -> None:
    llm_server.handler = lambda body: Reply(status=500)
    llm = AccountingModel(make_model(max_retries=1))

    with pytest.raises(GroupFailed) as caught:
        await ask_merge(llm, units(), DeduplicateRelationsConfig(max_attempts=2))

    assert "endpoint failed" in caught.value.reason
    assert llm.stats.requests == 4 == len(llm_server.requests)
    assert llm.stats.failed_requests == 4


async def test_ask_merge_stops_on_a_bad_key(
    llm_server: LLMServer, make_model: ModelFactory
) -> None:
    llm_server.handler = lambda body: Reply(status=401)
    llm = AccountingModel(make_model(api_key=API_KEY, max_retries=3))

    with pytest.raises(ProviderError) as caught:
        await ask_merge(llm, units(), DeduplicateRelationsConfig(max_attempts=3))

    assert caught.value.retryable is False
    assert llm.stats.requests == 1 == len(llm_server.requests)


async def test_merge_first_handler_merges_a_group_end_to_end(
    llm_server: LLMServer, make_model: ModelFactory
) -> None:
    llm_server.handler = merge_first_handler
    llm = AccountingModel(make_model())

    parts, _ = await ask_merge(llm, units(), DeduplicateRelationsConfig())

    assert len(parts) == 1
    assert parts[0].relation_ids == ("r1", "r2")
    assert parts[0].fields == {
        "type": "employment",
        "name": "CEO of",
        "description": RELATIONS[0].description,
        "attributes": {"since": "2019"},
    }
    assert llm.stats.requests == 1
    assert llm_server.errors == []


# The fake server itself -------------------------------------------------------------------


def _post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.status, orjson.loads(response.read())


async def test_llm_server_answers_a_complete_chat_completion(llm_server: LLMServer) -> None:
    llm_server.enqueue(Reply(content="hello", prompt_tokens=3, completion_tokens=2))
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

    status, answer = await asyncio.to_thread(_post, llm_server.base_url + "/chat/completions", body)

    assert status == 200
    assert answer["object"] == "chat.completion"
    assert answer["model"] == "m"
    assert isinstance(answer["id"], str)
    assert isinstance(answer["created"], int)
    assert answer["choices"][0]["message"] == {"role": "assistant", "content": "hello"}
    assert answer["choices"][0]["finish_reason"] == "stop"
    assert answer["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    assert llm_server.requests == [body]


def test_merge_first_handler_reads_the_last_user_message_with_records() -> None:
    request = merge_relations.build_request(
        RELATIONS, temperature=0.0, description_chars=2000, feedback=[("oops", "not JSON.")]
    )
    body = {"messages": [message.to_dict() for message in request.messages]}

    reply = merge_first_handler(body)

    assert reply.status == 200
    assert orjson.loads(reply.content) == MERGED
    assert merge_first_handler({"messages": [{"role": "user", "content": "hi"}]}).status == 400


async def test_a_run_goes_on_when_one_request_is_too_long_for_the_context(
    llm_server: LLMServer, make_model: ModelFactory
) -> None:
    from tests.factories import record, run_step

    def handler(body: dict[str, Any]) -> Reply:
        records = request_records(body) or []
        if any("very long" in item["description"] for item in records):
            return Reply(status=400, body={"error": {"message": "context length exceeded"}})
        return merge_first_handler(body)

    llm_server.handler = handler
    records = [
        record("a1", name="founded", description="Founded it in 1990."),
        record("a2", name="founded", description="Set it up in 1990."),
        record("b1", description="CEO since 2017, very long."),
        record("b2", description="Chief executive."),
    ]
    output, _, _ = await run_step(records, make_model(max_retries=1), concurrency=1)
    assert output.relation_id_mapping["a1"] == output.relation_id_mapping["a2"]
    assert output.relation_id_mapping["b1"] == "b1" and output.relation_id_mapping["b2"] == "b2"
    (issue,) = output.result["issues"]
    assert issue["code"] == "deduplication_failed"
    assert "context length exceeded" in issue["message"]


# Bounded answers and retries that change something (real HTTP) ---------------------------


async def test_every_request_is_bounded_by_its_task_and_records(
    llm_server: LLMServer, make_model: ModelFactory
) -> None:
    llm_server.enqueue(json_reply(MERGED), json_reply(MERGED))
    model = make_model(response_format="json_object")
    await ask_merge(model, units(), DeduplicateRelationsConfig())
    sized = llm_server.requests[0]["max_tokens"]
    descriptions = sum(len(r.description) for r in RELATIONS)
    assert sized == 128 + 64 * len(RELATIONS) + descriptions // 2
    await ask_merge(model, units(), DeduplicateRelationsConfig(max_answer_tokens=40))
    assert llm_server.requests[1]["max_tokens"] == 40  # the user's cap


async def test_an_answer_cut_at_its_limit_is_invalid_and_asked_again_differently(
    llm_server: LLMServer, make_model: ModelFactory
) -> None:
    """A cut answer is never read as a prefix (here the cut left a complete JSON object
    in the text); the retry says why and is sent without the grammar (prompt only)."""
    llm_server.enqueue(
        Reply(content=orjson.dumps(MERGED).decode() + ' {"relations": [', finish_reason="length"),
        json_reply(MERGED),
    )
    model = AccountingModel(make_model(response_format="json_object"))
    parts, _ = await ask_merge(model, units(), DeduplicateRelationsConfig())
    assert [part.relation_ids for part in parts] == [("r1", "r2")]
    first, retry = llm_server.requests
    assert first["response_format"]["type"] == "json_object"
    assert "response_format" not in retry  # relaxed: the same grammar would force the same
    assert "cut at its limit" in retry["messages"][-1]["content"]
    assert model.stats.invalid_answers == 1


async def test_a_retry_after_invalid_json_drops_the_response_format(
    llm_server: LLMServer, make_model: ModelFactory
) -> None:
    llm_server.enqueue(Reply(content='{"relation": {"type": "t",,}'), json_reply(MERGED))
    await ask_merge(
        make_model(response_format="json_schema"), units(), DeduplicateRelationsConfig()
    )
    first, retry = llm_server.requests
    assert first["response_format"]["type"] == "json_schema"
    assert "response_format" not in retry
