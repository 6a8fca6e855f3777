"""Any OpenAI-compatible chat endpoint (OpenAI, vLLM, Ollama, llama.cpp server, DeepSeek…).

Wire contract (DESIGN §4): ``POST {base_url}/chat/completions`` with ``model``, ``messages``,
``temperature`` and a ``response_format`` that depends on the configured mode, because
servers differ: ``json_schema`` (OpenAI, vLLM, Ollama), ``json_object`` with the schema
alongside (llama.cpp's server rejects ``json_schema``), or ``none`` (prompt only).

The SDK's own retries are off: this class retries 429/5xx/timeouts/dropped connections
itself, with exponential backoff, jitter and ``Retry-After``, so that every request sent is
counted (``LLMResult.attempts``); a request whose last try timed out says so
(``ProviderError.timed_out``). ``preflight()`` checks the endpoint before a run (see
``relmerge.providers.preflight``).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import openai

from relmerge.config import ResponseFormat
from relmerge.errors import ProviderError
from relmerge.providers.base import LLMRequest, LLMResult, Usage
from relmerge.providers.parsing import parse_json_answer
from relmerge.providers.preflight import (
    LLM_ENDPOINT,
    PREFLIGHT_MESSAGE,
    PREFLIGHT_SCHEMA,
    PREFLIGHT_TASK,
    STARTUP_WAIT_SECONDS,
    NotAnAnswer,
    check_base_url,
    preflight_timeout,
    probe,
)

_RETRYABLE = (
    openai.RateLimitError,
    openai.InternalServerError,
    openai.APITimeoutError,
    openai.APIConnectionError,
)
# Statuses worth another try besides 429/5xx, as the OpenAI SDK itself does.
_RETRYABLE_STATUS = (408, 409)
_MAX_BACKOFF_SECONDS = 30.0
# Statuses that reject one request rather than the endpoint (once it has answered before).
_REQUEST_STATUS = (400, 413, 422)
# No answer came back at all: what counts towards the run's circuit breaker (429 does not:
# the endpoint answered, and asked for patience).
_TRANSPORT = (openai.APIConnectionError, openai.InternalServerError)


class _NotACompletion(Exception):
    """A 2xx answer that is not a chat completion (no choices)."""


def _not_a_completion(error: Exception) -> str:
    if isinstance(error, _NotACompletion):
        return str(error)
    return f"the response is not JSON ({type(error).__name__})"


def response_format_for(mode: ResponseFormat, task: str, schema: dict[str, Any]) -> Any:
    """The ``response_format`` body field for a mode, or ``None`` to leave it out."""
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": task, "schema": schema}}
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    return None


def _retry_after_seconds(error: Exception) -> float | None:
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _describe(error: Exception) -> str:
    status = getattr(error, "status_code", None)
    kind = type(error).__name__
    return f"{kind} (HTTP {status})" if status else kind


class OpenAICompatibleModel:
    """Chat model behind an OpenAI-compatible ``base_url``.

    >>> model = OpenAICompatibleModel(base_url="http://127.0.0.1:8000/v1", model="qwen2.5")
    >>> model.name
    'qwen2.5'
    """

    available = True

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 4,
        response_format: ResponseFormat = "json_schema",
        backoff_seconds: float = 0.5,
        client: openai.AsyncOpenAI | None = None,
        startup_wait: float = STARTUP_WAIT_SECONDS,
    ) -> None:
        self.name = model
        self.base_url = base_url
        self.response_format: ResponseFormat = response_format
        self.max_retries = max_retries
        self.backoff_seconds = backoff_seconds
        self.timeout = timeout
        self.startup_wait = startup_wait
        self._healthy = False  # set by the first well-formed answer
        # Local servers (vLLM, Ollama, llama.cpp) need no key, but the SDK insists on one.
        self._client = client or openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or "not-needed",
            timeout=timeout,
            max_retries=0,
        )

    @property
    def cache_identity(self) -> dict[str, Any]:
        """What besides the request determines an answer (the key is not part of it)."""
        return {
            "provider": "openai",
            "base_url": self.base_url,
            "model": self.name,
            "response_format": self.response_format,
        }

    def __repr__(self) -> str:  # never shows the API key
        return f"OpenAICompatibleModel(base_url={self.base_url!r}, model={self.name!r})"

    def _body(self, request: LLMRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.name,
            "messages": [message.to_dict() for message in request.messages],
            "temperature": request.temperature,
        }
        mode: ResponseFormat = "none" if request.relaxed else self.response_format
        response_format = response_format_for(mode, request.task, request.schema)
        if response_format is not None:
            body["response_format"] = response_format
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        return body

    async def preflight(self) -> int:
        """One minimal chat completion (one short message, ``max_tokens`` 1, the configured
        ``response_format``): the requests it took, or :class:`ProviderError` saying why
        this endpoint cannot work. A server still starting is retried for
        ``startup_wait`` seconds."""
        check_base_url(self.base_url, LLM_ENDPOINT)
        body: dict[str, Any] = {
            "model": self.name,
            "messages": [{"role": "user", "content": PREFLIGHT_MESSAGE}],
            "temperature": 0.0,
            "max_tokens": 1,
        }
        response_format = response_format_for(
            self.response_format, PREFLIGHT_TASK, PREFLIGHT_SCHEMA
        )
        if response_format is not None:
            body["response_format"] = response_format

        async def send() -> None:
            completion = await self._client.chat.completions.create(
                **body, timeout=preflight_timeout(self.timeout)
            )
            choices = getattr(completion, "choices", None)
            if not isinstance(choices, list) or not choices:
                raise NotAnAnswer("the answer is not a chat completion (no choices)")

        sent = await probe(
            send,
            label=LLM_ENDPOINT,
            base_url=self.base_url,
            url=self.base_url.rstrip("/") + "/chat/completions",
            timeout=self.timeout,
            startup_wait=self.startup_wait,
            redact=self._redact,
        )
        self._healthy = True
        return sent

    async def invoke(self, request: LLMRequest) -> LLMResult:
        """Send one request; retry transient failures; raise :class:`ProviderError`.

        Until the endpoint has answered once (the preflight counts), an answer that is not
        a chat completion and a rejected request (400, 413, 422) mean a misconfiguration,
        which stops the run.
        Afterwards they are one request's problem (a proxy's error page, a prompt too long
        for the context): retried, then ``retryable`` so that only its group fails.
        """
        body = self._body(request)
        attempts = 0
        while True:
            attempts += 1
            try:
                completion = await self._client.chat.completions.create(**body)
                return self._result(completion, attempts)
            except _RETRYABLE as error:
                await self._wait_or_give_up(error, _describe(error), attempts)
            except openai.APIStatusError as error:
                if error.status_code in _RETRYABLE_STATUS and attempts <= self.max_retries:
                    await asyncio.sleep(self._delay(error, attempts))
                    continue
                raise ProviderError(
                    f"{self.base_url}: {_describe(error)}: {self._redact(error.message)}",
                    retryable=self._healthy and error.status_code in _REQUEST_STATUS,
                    attempts=attempts,
                ) from None
            except openai.OpenAIError as error:
                raise ProviderError(
                    f"{self.base_url}: {_describe(error)}", retryable=False, attempts=attempts
                ) from None
            except (ValueError, _NotACompletion) as error:  # 2xx, but not a chat completion
                if not self._healthy:
                    raise ProviderError(
                        f"{self.base_url}: {_not_a_completion(error)}; is this an "
                        "OpenAI-compatible chat endpoint (base URL usually ends in /v1)?",
                        retryable=False,
                        attempts=attempts,
                    ) from None
                await self._wait_or_give_up(error, _not_a_completion(error), attempts)

    async def _wait_or_give_up(self, error: Exception, what: str, attempts: int) -> None:
        """Sleep before the next try, or raise a retryable error once the retries are spent."""
        if attempts > self.max_retries:
            raise ProviderError(
                f"{self.base_url}: {what} after {attempts} attempts",
                retryable=True,
                attempts=attempts,
                transport=isinstance(error, _TRANSPORT),
                timed_out=isinstance(error, openai.APITimeoutError),
            ) from None
        await asyncio.sleep(self._delay(error, attempts))

    def _delay(self, error: Exception, attempts: int) -> float:
        """Seconds before the next try: ``Retry-After`` if given, else backoff with jitter."""
        delay = _retry_after_seconds(error)
        if delay is None:
            delay = self.backoff_seconds * 2 ** (attempts - 1)
            delay *= 0.5 + random.random()  # jitter spreads concurrent retries
        return min(delay, _MAX_BACKOFF_SECONDS)

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self._client.close()

    def _redact(self, text: str) -> str:
        """``text`` without the API key (some servers quote the key they rejected)."""
        key = getattr(self._client, "api_key", None)
        if isinstance(key, str) and len(key) >= 4:
            text = text.replace(key, "***")
        return text

    def _result(self, completion: Any, attempts: int) -> LLMResult:
        choices = getattr(completion, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise _NotACompletion("the response has no choices")
        text = ""
        if choices and choices[0].message is not None:
            text = choices[0].message.content or ""
        truncated = getattr(choices[0], "finish_reason", None) == "length"
        usage = getattr(completion, "usage", None)
        self._healthy = True
        return LLMResult(
            text=text,
            parsed=parse_json_answer(text),
            model=getattr(completion, "model", None) or self.name,
            usage=Usage(
                prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
                reported=getattr(usage, "prompt_tokens", None) is not None,
            ),
            attempts=attempts,
            truncated=truncated,
        )
