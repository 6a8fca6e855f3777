"""The preflight request: what it sends, how it looks through wrappers, what it forgives."""

from __future__ import annotations

import pytest

from relmerge.errors import ProviderError
from relmerge.providers import preflight
from relmerge.providers.base import NoLanguageModel
from relmerge.providers.fake import ScriptedLLM
from relmerge.providers.limits import RateLimitedModel
from relmerge.providers.openai_compat import OpenAICompatibleModel
from relmerge.providers.preflight import PREFLIGHT_MESSAGE, PREFLIGHT_TASK
from tests.support.llm_server import LLMServer, Reply

KEY = "sk-preflight-0123456789"


async def test_one_minimal_request_with_the_configured_response_format() -> None:
    with LLMServer() as server:
        model = OpenAICompatibleModel(
            base_url=server.base_url, model="m", response_format="json_object"
        )
        assert await preflight(RateLimitedModel(model, 60)) == 1  # found through the wrapper
        await model.aclose()
        (body,) = server.requests
    assert body["messages"] == [{"role": "user", "content": PREFLIGHT_MESSAGE}]
    assert body["max_tokens"] == 1 and body["temperature"] == 0.0
    assert body["response_format"]["type"] == "json_object"


async def test_json_schema_mode_names_the_preflight_task() -> None:
    with LLMServer() as server:
        model = OpenAICompatibleModel(base_url=server.base_url, model="m")
        await preflight(model)
        await model.aclose()
        format_ = server.requests[0]["response_format"]
    assert format_["json_schema"]["name"] == PREFLIGHT_TASK


async def test_models_without_an_endpoint_have_nothing_to_check() -> None:
    assert await preflight(NoLanguageModel()) == 0
    assert await preflight(ScriptedLLM([])) == 0
    assert await preflight(None) == 0


async def test_an_endpoint_that_only_rate_limits_is_there() -> None:
    """429 is retried while the wait lasts, then passes: the endpoint answered, and the
    run's own retries honour its Retry-After."""
    busy = Reply(status=429, headers={"Retry-After": "0"})
    with LLMServer(preflight=busy) as server:
        model = OpenAICompatibleModel(base_url=server.base_url, model="m", startup_wait=0.3)
        sent = await preflight(model)
        await model.aclose()
    assert sent >= 2 and sent == server.preflight_count


async def test_the_key_a_server_quotes_back_is_never_shown() -> None:
    refusal = Reply(status=401, body={"error": {"message": f"invalid key {KEY}"}})
    with LLMServer(preflight=refusal) as server:
        url = server.base_url
        model = OpenAICompatibleModel(base_url=url, model="m", api_key=KEY)
        with pytest.raises(ProviderError) as caught:
            await preflight(model)
        await model.aclose()
    message = str(caught.value)
    assert KEY not in message and "***" in message and url in message
    assert caught.value.retryable is False
