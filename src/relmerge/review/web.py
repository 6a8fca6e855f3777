"""The browser review page: a small server on the loopback interface over a :class:`ReviewQueue`.

One page (``page.html``, no external assets) and three JSON endpoints: ``GET api/state``
(the questions to go through — pending ones, or with ``revise`` answered ones too — their
current answers, and how to apply the answers: the command that made OUT), ``POST
api/answer`` (``{id, answer}``), ``POST api/undo`` (``{id}``).
The questions hold the graph's records and profiles, and an answer changes the next run,
so the server answers its own page and nothing else:

* it listens on 127.0.0.1 only, with no option to listen elsewhere;
* it answers only requests whose ``Host`` is 127.0.0.1, localhost or [::1] with its own
  port, so a site that points its own name at 127.0.0.1 (DNS rebinding) is refused;
* every API call carries a random token made for this session and embedded in the page
  (``X-Relmerge-Token``): a page of another site can send requests, but never read it;
* a request whose ``Origin`` is not the page's own, and a POST whose body is not
  ``application/json`` (a cross-site form or ``text/plain`` beacon), are refused.

A refused request gets 403 (415 for the body type) and changes nothing.
"""

from __future__ import annotations

import hmac
import secrets
import shlex
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
from rich.console import Console

from relmerge.errors import RelmergeError
from relmerge.review.queue import ReviewQueue
from relmerge.review.rerun import command_outline, recorded_command

_PAGE = resources.files("relmerge.review").joinpath("page.html")
TOKEN_HEADER = "X-Relmerge-Token"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_MAX_BODY = 64 * 1024  # an answer is a few dozen bytes
_SECURITY_HEADERS = {
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}


def allowed_hosts(port: int) -> frozenset[str]:
    """The ``Host`` values of the page's own address (lower case)."""
    hosts = {f"{name}:{port}" for name in LOOPBACK_NAMES}
    if port == 80:  # browsers leave out the default port
        hosts.update(LOOPBACK_NAMES)
    return frozenset(hosts)


@dataclass(frozen=True)
class _Site:
    """What the handler of every request needs: the queue, the page and its policy, and
    what a request must carry to be the page's own (see the module)."""

    queue: ReviewQueue
    revise: bool
    token: str
    page: bytes
    policy: str  # the page's Content-Security-Policy
    hosts: frozenset[str]
    origins: frozenset[str]
    lock: threading.Lock


class _Server(ThreadingHTTPServer):
    site: _Site


class _Handler(BaseHTTPRequestHandler):
    """One request to the review page (its site on the server: :class:`_Site`)."""

    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(
        self,
        status: int,
        body: bytes,
        kind: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        for name, value in {**_SECURITY_HEADERS, **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _refuse(self, status: int, why: str) -> None:
        self.close_connection = True
        self._send(status, orjson.dumps({"error": why}))

    def _refusal(self, api: bool) -> str | None:
        """Why this request is not the page's own, or None."""
        site = self.server.site
        named = self.headers.get_all("Host") or []
        if len(named) != 1 or named[0].strip().lower() not in site.hosts:
            return "this server answers only http://127.0.0.1 with its own port"
        origin = self.headers.get("Origin")
        if origin is not None and origin.strip().lower() not in site.origins:
            return "requests from other origins are refused"
        sent = self.headers.get(TOKEN_HEADER) or ""
        if api and not hmac.compare_digest(sent.encode(), site.token.encode()):
            return "missing or wrong session token: reload the page"
        return None

    def _path(self) -> str:
        return urlsplit(self.path).path

    def do_GET(self) -> None:
        site = self.server.site
        path = self._path()
        why = self._refusal(api=path.startswith("/api/"))
        if why is not None:
            self._refuse(403, why)
        elif path in ("/", "/index.html"):
            csp = {"content-security-policy": site.policy}
            self._send(200, site.page, "text/html; charset=utf-8", csp)
        elif path == "/api/state":
            with site.lock:
                state = _state(site.queue, site.revise)
            self._send(200, orjson.dumps(state))
        else:
            self._send(404, b'{"error": "not found"}')

    def do_POST(self) -> None:
        site = self.server.site
        why = self._refusal(api=True)
        if why is not None:
            self._refuse(403, why)
            return
        if self.headers.get_content_type() != "application/json":
            self._refuse(415, "the body must be application/json")
            return
        try:
            length = int(self.headers.get("content-length", 0))
            if not 0 <= length <= _MAX_BODY:
                self._refuse(413, "the body is too large")
                return
            body = orjson.loads(self.rfile.read(length) or b"{}")
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            path = self._path()
            with site.lock:
                if path == "/api/answer":
                    site.queue.answer(str(body.get("id")), str(body.get("answer")))
                elif path == "/api/undo":
                    site.queue.undo(str(body.get("id")))
                else:
                    self._send(404, b'{"error": "not found"}')
                    return
                left = len(site.queue.pending())
            self._send(200, orjson.dumps({"left": left}))
        except (RelmergeError, orjson.JSONDecodeError, ValueError) as error:
            self._send(400, orjson.dumps({"error": str(error)}))


def _state(queue: ReviewQueue, revise: bool) -> dict[str, Any]:
    """What ``GET api/state`` answers: the questions to go through, their current
    answers, how many are answered, and how to apply the answers."""
    questions = queue.to_review(revise)
    return {
        "pending": questions,
        "current": {q["id"]: queue.answers[q["id"]] for q in questions if q["id"] in queue.answers},
        "answered": len(queue.answers),
        "total": len(queue.questions),
        "apply": apply_hint(queue.root),
    }


class ReviewServer:
    """The review page on ``http://127.0.0.1:PORT/`` (``port=0``: any free port)."""

    def __init__(self, queue: ReviewQueue, port: int = 0, revise: bool = False) -> None:
        self.queue = queue
        self.token = secrets.token_urlsafe(32)
        nonce = secrets.token_urlsafe(16)
        # Bound first: the allowed Host values name the port the system gave.
        self._server = _Server(("127.0.0.1", port), _Handler)
        hosts = allowed_hosts(int(self._server.server_address[1]))
        page = (
            _PAGE.read_text(encoding="utf-8")
            .replace("{{RELMERGE_TOKEN}}", self.token)
            .replace("{{SCRIPT_NONCE}}", nonce)
            .encode()
        )
        policy = (
            f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; "
            "connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'none'"
        )
        origins = frozenset(f"http://{host}" for host in hosts)
        self._server.site = _Site(
            queue, revise, self.token, page, policy, hosts, origins, threading.Lock()
        )
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/"

    def start(self) -> ReviewServer:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> ReviewServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def apply_hint(out: Path) -> dict[str, str | None]:
    """How the page says to apply the answers: the command that made OUT (None when OUT
    does not record it) and the review's own one-step form."""
    command = recorded_command(out)
    return {
        "command": command.shell() if command is not None else None,
        "review_apply": None
        if command is None or command.hidden
        else f"relmerge review {shlex.quote(str(out))} --apply",
        "outline": command_outline(out),  # what to run where OUT records no command
    }


def serve(queue: ReviewQueue, port: int, console: Console, revise: bool = False) -> None:
    """Serve until Ctrl-C (the end of a browser review, not an interruption: the command
    goes on to apply the answers)."""
    with ReviewServer(queue, port, revise) as server:
        shown = "questions, answered ones too" if revise else "pending"
        console.print(
            f"review page: {server.url}  ({len(queue.to_review(revise))} {shown}; keys m / k / "
            "s / u; Ctrl-C here when done, to apply the answers)",
            markup=False,
        )
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            console.print("stopped")
