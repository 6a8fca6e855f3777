"""Preflight: one minimal request to each endpoint before a run spends anything.

An endpoint that is not there, or is not an LLM, must not look like a run whose groups all
failed. Before any input is read, ``relmerge run``, ``relmerge judge`` and the step send one
chat completion (one short user message, ``max_tokens`` 1, the configured
``response_format``) and, with an OpenAI-compatible embedder, one embeddings request.
Connection refused, an unknown host, a missing scheme, a TLS failure, a timeout, HTTP
401/403/404/405/501, a refused request or an answer that is not a completion raise a
:class:`~relmerge.errors.ProviderError` whose one line names the URL (never the key), what
was wrong and what to check.

A server that is still starting refuses connections, or answers 5xx or 429, for a moment:
those are retried for ``startup_wait`` seconds (default 5), so a dead endpoint is still
reported within seconds. The preflight goes straight to the provider, under the budget,
cache and accounting wrappers: it is counted apart (``preflight_requests``).
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import openai

from relmerge.errors import ProviderError
from relmerge.providers.base import preflighter

PREFLIGHT_MESSAGE = "Reply with one word: OK."
PREFLIGHT_TASK = "preflight"
PREFLIGHT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "string"}},
    "required": ["ok"],
    "additionalProperties": False,
}
STARTUP_WAIT_SECONDS = 5.0
# A host that takes longer than this to accept a connection is not going to answer.
CONNECT_TIMEOUT_SECONDS = 10.0
_FIRST_DELAY = 0.25
_MAX_DELAY = 2.0
_MESSAGE_CHARS = 200
_SDK_PREFIX = re.compile(r"^Error code: \d+( - )?")  # the status, which is said already

LLM_ENDPOINT = "LLM endpoint"
EMBEDDINGS_ENDPOINT = "embeddings endpoint"


class NotAnAnswer(Exception):
    """A 2xx answer that is not what the endpoint's API returns (no choices, no vectors)."""


@dataclass(frozen=True)
class Problem:
    """What went wrong, what to check, and whether a starting server may still pass."""

    what: str
    check: str
    starting: bool = False  # refused, 5xx, a dropped connection: retried for startup_wait
    alive: bool = False  # 429: the endpoint is there and answers; it passes after the wait


def check_base_url(url: str, label: str) -> None:
    """Refuse a base URL without an ``http://`` or ``https://`` scheme and a host, with a
    suggestion: the SDK's own error for it says only "Connection error"."""
    parts = urlsplit(url)
    if parts.scheme.lower() in ("http", "https") and parts.netloc:
        return
    hint = f"; did you mean 'http://{url}'?" if "://" not in url else ""
    raise ProviderError(
        f"{label} base URL {url!r} needs an http:// or https:// scheme and a host{hint}",
        retryable=False,
        attempts=0,
    )


def preflight_timeout(timeout: float) -> openai.Timeout:
    """The request timeout, with a connect timeout of at most ``CONNECT_TIMEOUT_SECONDS``."""
    return openai.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT_SECONDS))


def _causes(error: BaseException) -> Iterator[BaseException]:
    """``error`` and what caused it (the SDK wraps httpx, which wraps the socket error)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _one_line(text: str, redact: Callable[[str], str]) -> str:
    text = " ".join(redact(text).split())
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 1] + "…"


def _status_problem(status: int, message: str, url: str) -> Problem:
    said = f" ({message})" if message else ""
    if status in (401, 403):
        return Problem(
            f"HTTP {status}, the API key was refused{said}",
            "check the API key (its environment variable) and its access to this model",
        )
    if status == 404:
        return Problem(
            f"HTTP 404 for POST {url}{said}",
            "check the base URL (it usually ends in /v1) and the model name",
        )
    if status in (405, 501):
        return Problem(
            f"HTTP {status}, the server does not accept POST {url}{said}",
            "is this an OpenAI-compatible endpoint? check the base URL (it usually ends in /v1)",
        )
    if status == 429:
        return Problem(f"HTTP 429{said}", "the endpoint limits requests", alive=True)
    if status >= 500:
        return Problem(
            f"HTTP {status}{said}", "the server answers but fails; check its log", starting=True
        )
    return Problem(
        f"HTTP {status}, the server refused a minimal request{said}",
        "check the model name, and that the server supports the response format "
        "(json_schema, json_object or none)",
    )


def problem_of(
    error: BaseException, url: str, timeout: float, redact: Callable[[str], str] = str
) -> Problem:
    """Name what ``error`` says about the endpoint at ``url`` (the full request URL)."""
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        message = _SDK_PREFIX.sub("", str(getattr(error, "message", "") or ""))
        return _status_problem(status, _one_line(message, redact), url)
    if isinstance(error, NotAnAnswer | ValueError):
        return Problem(
            str(error) if isinstance(error, NotAnAnswer) else "the answer is not JSON",
            "is this an OpenAI-compatible endpoint? check the base URL (it usually ends in /v1)",
        )
    causes = list(_causes(error))
    names = {type(cause).__name__ for cause in causes}
    host = urlsplit(url).hostname or url
    for cause in causes:
        if isinstance(cause, ConnectionRefusedError):
            return Problem(
                "connection refused", "is the server running, on this host and port?", True
            )
        if isinstance(cause, socket.gaierror):
            return Problem(
                f"host {host!r} not found ({cause.strerror or cause})",
                "check the host name in the base URL",
            )
        if isinstance(cause, ssl.SSLError):
            reason = getattr(cause, "reason", None) or type(cause).__name__
            return Problem(
                f"TLS handshake failed ({reason})",
                "check http:// versus https:// and the server's certificate",
            )
    if "UnsupportedProtocol" in names:
        return Problem("the URL has no http:// or https:// scheme", "check the base URL")
    if "ConnectTimeout" in names:
        return Problem(
            f"no connection within {min(timeout, CONNECT_TIMEOUT_SECONDS):g} s",
            "check the host and port, and any firewall in between",
        )
    if isinstance(error, openai.APITimeoutError) or "ReadTimeout" in names:
        return Problem(
            f"no answer within {timeout:g} s",
            "check that the server is up and not overloaded, or allow a longer timeout",
        )
    if "RemoteProtocolError" in names:
        return Problem(
            "the connection was closed without an answer",
            "is this an HTTP endpoint? check the server's log",
            starting=True,
        )
    detail = str(causes[-1]) or type(causes[-1]).__name__
    return Problem(
        f"could not connect ({_one_line(detail, str)})",
        "check the base URL and that the server is running",
    )


async def probe(
    send: Callable[[], Awaitable[None]],
    *,
    label: str,
    base_url: str,
    url: str,
    timeout: float,
    startup_wait: float,
    redact: Callable[[str], str] = str,
) -> int:
    """``send()`` until it succeeds; return the requests sent. What a starting server
    answers is retried for ``startup_wait`` seconds; anything else raises at once."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    delay = _FIRST_DELAY
    attempts = 0
    while True:
        attempts += 1
        try:
            await send()
            return attempts
        except (openai.OpenAIError, NotAnAnswer, ValueError) as error:
            problem = problem_of(error, url, timeout, redact)
        left = startup_wait - (loop.time() - started)
        if (problem.starting or problem.alive) and left > 0:
            await asyncio.sleep(min(delay, left))
            delay = min(2 * delay, _MAX_DELAY)
            continue
        if problem.alive:
            return attempts  # rate-limited, but there: the run's own retries wait for it
        waited = loop.time() - started
        retried = f" (retried for {waited:.0f} s)" if attempts > 1 else ""
        raise ProviderError(
            f"{label} {base_url}: {problem.what}{retried}; {problem.check}",
            retryable=False,
            attempts=attempts,
        ) from None


async def preflight(model: object) -> int:
    """Check the endpoint behind ``model``: the first of it and the layers it wraps that
    can check its endpoint (:class:`~relmerge.providers.base.Preflightable`) does. Returns
    the requests sent, 0 when there is nothing to check (rules only, in-process models);
    raises :class:`~relmerge.errors.ProviderError` when the endpoint cannot work."""
    checker = preflighter(model)
    return int(await checker.preflight()) if checker is not None else 0
