"""A fake OpenAI-compatible chat server on 127.0.0.1, built on the standard library only.

It answers ``POST /v1/chat/completions`` over real HTTP, so a provider under test goes
through the real SDK and HTTP stack. Answers are scripted::

    with LLMServer(handler=merge_first_handler) as server:
        server.enqueue(Reply(status=429, headers={"Retry-After": "0"}), Reply(content="{}"))
        model = OpenAICompatibleModel(base_url=server.base_url, model="fake")
        ...
        assert len(server.requests) == 2

Queued replies are used first, in order; when the queue is empty, ``handler(body)`` answers.
relmerge's preflight request (one short message, ``max_tokens`` 1) is answered by
``preflight`` (a one-token completion, as any chat server gives) before the queue or the
handler see it; ``preflight=None`` leaves it to them. The handler answers a packed request
(``relation_cluster_many``) block by block, each block put to it as the block's own
question (``per_block_reply``), so a handler of the one-question tasks answers packs too;
``per_block=False`` hands it the packed request as it is. Every chat request is recorded:
``requests`` holds the JSON bodies (``group_requests`` those that are not the preflight)
and ``headers`` the matching headers (lower-cased names). ``received`` records every HTTP
request, any path.
"""

from __future__ import annotations

import contextlib
import re
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import orjson

from relmerge.providers.fake import PACKED_TASK, answer_blocks, question_text

CHAT_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    ``content`` is what the model says (the assistant message of a 200 answer). ``body``
    replaces the whole response body: ``bytes`` are sent as they are, anything else is sent
    as JSON; non-200 answers without ``body`` get an OpenAI-style error object. ``delay``
    seconds pass before answering; ``drop`` closes the connection without any answer.
    Token counts default to a rough count of characters / 4.
    """

    status: int = 200
    content: str = ""
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    drop: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"  # "length": the answer was cut at max_tokens


PREFLIGHT_OK = Reply(content="OK", finish_reason="length", completion_tokens=1)


def is_preflight(body: Any) -> bool:
    """Whether a chat body is relmerge's preflight request."""
    from relmerge.providers.preflight import PREFLIGHT_MESSAGE

    return (
        isinstance(body, dict)
        and body.get("max_tokens") == 1
        and body.get("messages") == [{"role": "user", "content": PREFLIGHT_MESSAGE}]
    )


def json_reply(value: Any, **options: Any) -> Reply:
    """A 200 reply whose content is ``value`` as JSON text."""
    return Reply(content=orjson.dumps(value).decode(), **options)


Handler = Callable[[dict[str, Any]], Reply]


@dataclass(frozen=True)
class Received:
    """One HTTP request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


def no_script_handler(body: dict[str, Any]) -> Reply:
    """The default fallback: a loud, non-retryable error that names the problem."""
    return Reply(
        status=418,
        body={
            "error": {
                "message": "LLMServer has no scripted reply left and no handler",
                "type": "test_error",
                "code": "no_script",
            }
        },
    )


_FENCE_START = "```json"
_FENCE_END = re.compile(r"\n```")


def fenced_records(text: str) -> list[dict[str, Any]] | None:
    """The JSON array of the first ```json block in ``text``, or None.

    The end fence is the first closing fence after which the block parses, so backticks
    inside a record's description do not cut the block short.
    """
    start = text.find(_FENCE_START)
    if start < 0:
        return None
    start += len(_FENCE_START)
    for end in _FENCE_END.finditer(text, start):
        try:
            value = orjson.loads(text[start : end.start()])
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, list) and all(isinstance(item, dict) for item in value):
            return value
        return None
    return None


def request_records(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Records of a chat body: the ```json array of the last user message that has one."""
    messages = body.get("messages") or []
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            records = fenced_records(content)
            if records is not None:
                return records
    return None


def merge_first_handler(body: dict[str, Any]) -> Reply:
    """An LLM that merges every ``relation_merge`` group into its first record's fields."""
    records = request_records(body)
    if not records:
        return Reply(
            status=400,
            body={
                "error": {
                    "message": "merge_first_handler: no ```json records in any user message",
                    "type": "invalid_request_error",
                    "code": None,
                }
            },
        )
    first = records[0]
    relation = {key: first.get(key) for key in ("type", "name", "description", "attributes")}
    if relation["attributes"] is None:
        relation["attributes"] = {}
    return json_reply({"relation": relation})


def body_task(body: dict[str, Any]) -> str | None:
    """The task of a chat body: its schema's name, else its system message's task line."""
    schema = (body.get("response_format") or {}).get("json_schema") or {}
    if isinstance(schema.get("name"), str):
        return str(schema["name"])
    for message in body.get("messages") or []:
        if not isinstance(message, dict) or message.get("role") != "system":
            continue
        content = message.get("content")
        if isinstance(content, str):
            match = re.match(r"Task: (\w+)", content)
            return match.group(1) if match else None
    return None


class _Whole(Exception):
    """A block's reply that is no answer (an error, a dropped connection): the request's."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply


def per_block_reply(handler: Handler, body: dict[str, Any]) -> Reply:
    """A packed request answered by ``handler`` block by block: each block is sent to it
    as its own question's body (the task's line and schema name, the block's records and
    entities), and the answers are joined (``fake.answer_blocks``). A reply that is not a
    200 answer is the whole request's."""
    delay = 0.0

    def one(task: str, records: list[dict[str, Any]], block: Any) -> Any:
        nonlocal delay
        fmt = body.get("response_format")
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            fmt = {**fmt, "json_schema": {**fmt.get("json_schema", {}), "name": task}}
        messages = [
            {"role": "system", "content": f"Task: {task}\n"},
            {"role": "user", "content": question_text(records, block.get("entities"))},
        ]
        reply = handler({**body, "messages": messages, "response_format": fmt})
        if reply.status != 200 or reply.drop or reply.body is not None:
            raise _Whole(reply)
        delay = max(delay, reply.delay)
        return reply.content

    try:
        return json_reply(answer_blocks(request_records(body) or [], one), delay=delay)
    except _Whole as whole:
        return whole.reply


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _completion(body: dict[str, Any], reply: Reply, number: int) -> dict[str, Any]:
    prompt_text = "".join(
        str(message.get("content", ""))
        for message in body.get("messages") or []
        if isinstance(message, dict)
    )
    prompt_tokens = reply.prompt_tokens
    if prompt_tokens is None:
        prompt_tokens = _estimate_tokens(prompt_text)
    completion_tokens = reply.completion_tokens
    if completion_tokens is None:
        completion_tokens = _estimate_tokens(reply.content)
    return {
        "id": f"chatcmpl-fake-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model") or "fake-model"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.content},
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _error_body(status: int) -> dict[str, Any]:
    kind = "rate_limit_error" if status == 429 else "server_error" if status >= 500 else "error"
    return {"error": {"message": f"scripted HTTP {status}", "type": kind, "code": None}}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    # socketserver's default backlog of 5 drops the SYNs of a burst of concurrent clients,
    # and each dropped SYN costs the client a one-second retransmit.
    request_queue_size = 128
    owner: LLMServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a killed or interrupted run) is no error of the server."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.server.owner._untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _record(self, raw: bytes) -> Received:
        try:
            body: Any = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            body = raw.decode("utf-8", "replace")
        headers = {name.lower(): value for name, value in self.headers.items()}
        received = Received(self.command, self.path, headers, body)
        self.server.owner._record(received)
        return received

    def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            extra = headers or {}
            self.send_response(status)
            if not any(name.lower() == "content-type" for name in extra):
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in extra.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
        except OSError:  # the client gave up (timeout) or went away
            self.close_connection = True

    def do_GET(self) -> None:
        self._record(b"")
        self._send(404, orjson.dumps(_error_body(404)))

    def do_POST(self) -> None:
        received = self._record(self._read_body())
        if received.path != CHAT_PATH:
            self._send(404, orjson.dumps(_error_body(404)))
            return
        if not isinstance(received.body, dict):
            self._send(400, orjson.dumps(_error_body(400)))
            return
        owner = self.server.owner
        number = owner._count_chat(received)
        try:
            reply = owner._next_reply(received.body)
        except Exception as error:  # a broken handler must fail the test, not hang it
            owner._fail(f"handler raised {error!r}")
            self._send(500, orjson.dumps(_error_body(500)))
            return
        if reply.delay > 0 and owner._stopping.wait(reply.delay):
            self.close_connection = True  # the server is stopping
            return
        if reply.drop:
            self.close_connection = True
            return
        if reply.body is not None:
            payload = reply.body if isinstance(reply.body, bytes) else orjson.dumps(reply.body)
        elif reply.status == 200:
            payload = orjson.dumps(_completion(received.body, reply, number))
        else:
            payload = orjson.dumps(_error_body(reply.status))
        self._send(reply.status, payload, reply.headers)


class LLMServer:
    """A started-on-demand fake OpenAI-compatible server; use as a context manager."""

    def __init__(
        self,
        handler: Handler | None = None,
        *,
        host: str = "127.0.0.1",
        preflight: Reply | None = PREFLIGHT_OK,
        per_block: bool = True,
    ) -> None:
        self.handler: Handler = handler or no_script_handler
        self.per_block = per_block
        self.host = host
        self.preflight = preflight
        self.errors: list[str] = []
        self._queue: deque[Reply] = deque()
        self._received: list[Received] = []
        self._chat: list[Received] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # Lifecycle --------------------------------------------------------------------------

    def start(self) -> LLMServer:
        if self._httpd is not None:
            raise RuntimeError("LLMServer is already started")
        self._stopping.clear()
        httpd = _Server((self.host, 0), _RequestHandler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._stopping.set()  # wakes handlers that are waiting out a delay
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:  # ends idle keep-alive connections
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        if thread is not None:
            thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # Addresses --------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("LLMServer is not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The server root, e.g. ``http://127.0.0.1:PORT``."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as ``base_url``: ``http://127.0.0.1:PORT/v1``."""
        return f"{self.url}/v1"

    # Script -----------------------------------------------------------------------------

    def enqueue(self, *replies: Reply) -> None:
        """Queue replies for the next chat requests, in order."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """Queued replies not used yet."""
        with self._lock:
            return len(self._queue)

    # Records ----------------------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """JSON bodies of the chat requests received, in arrival order."""
        with self._lock:
            return [received.body for received in self._chat]

    @property
    def group_requests(self) -> list[dict[str, Any]]:
        """The chat bodies received that are not the preflight request, in order."""
        return [body for body in self.requests if not is_preflight(body)]

    @property
    def preflight_count(self) -> int:
        """Preflight requests received."""
        return sum(1 for body in self.requests if is_preflight(body))

    @property
    def headers(self) -> list[dict[str, str]]:
        """Headers (lower-cased names) of the chat requests, parallel to ``requests``."""
        with self._lock:
            return [received.headers for received in self._chat]

    @property
    def received(self) -> list[Received]:
        """Every HTTP request received, any method and path."""
        with self._lock:
            return list(self._received)

    def iter_requests(self) -> Iterator[tuple[dict[str, Any], dict[str, str]]]:
        """(body, headers) of each chat request."""
        return iter(zip(self.requests, self.headers, strict=True))

    # Called from handler threads --------------------------------------------------------

    def _track(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.add(connection)

    def _untrack(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.discard(connection)

    def _record(self, received: Received) -> None:
        with self._lock:
            self._received.append(received)

    def _count_chat(self, received: Received) -> int:
        with self._lock:
            self._chat.append(received)
            return len(self._chat)

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        if self.preflight is not None and is_preflight(body):
            return self.preflight
        with self._lock:
            queued = self._queue.popleft() if self._queue else None
        if queued is not None:
            return queued
        if self.per_block and body_task(body) == PACKED_TASK:
            return per_block_reply(self.handler, body)
        return self.handler(body)

    def _fail(self, message: str) -> None:
        with self._lock:
            self.errors.append(message)
