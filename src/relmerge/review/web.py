"""The browser review page: a small server on 127.0.0.1 over a :class:`ReviewQueue`.

One page (``page.html``, no external assets) and three JSON endpoints: ``GET api/state``
(pending questions), ``POST api/answer`` (``{id, answer}``), ``POST api/undo`` (``{id}``).
It listens on the loopback interface only: the questions contain the graph's data.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

import orjson
from rich.console import Console

from relmerge.errors import RelmergeError
from relmerge.review.queue import ReviewQueue

_PAGE = resources.files("relmerge.review").joinpath("page.html")


class ReviewServer:
    def __init__(self, queue: ReviewQueue, port: int = 0) -> None:
        self.queue = queue
        lock = threading.Lock()
        page = _PAGE.read_bytes()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.send_header("cache-control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path in ("/", "/index.html"):
                    self._send(200, page, "text/html; charset=utf-8")
                elif self.path == "/api/state":
                    with lock:
                        state = {
                            "pending": queue.pending(),
                            "answered": len(queue.answers),
                            "total": len(queue.questions),
                        }
                    self._send(200, orjson.dumps(state))
                else:
                    self._send(404, b'{"error": "not found"}')

            def do_POST(self) -> None:
                try:
                    length = int(self.headers.get("content-length", 0))
                    body = orjson.loads(self.rfile.read(length) or b"{}")
                    with lock:
                        if self.path == "/api/answer":
                            queue.answer(str(body.get("id")), str(body.get("answer")))
                        elif self.path == "/api/undo":
                            queue.undo(str(body.get("id")))
                        else:
                            self._send(404, b'{"error": "not found"}')
                            return
                        left = len(queue.pending())
                    self._send(200, orjson.dumps({"left": left}))
                except (RelmergeError, orjson.JSONDecodeError, ValueError) as error:
                    self._send(400, orjson.dumps({"error": str(error)}))

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
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


def serve(queue: ReviewQueue, port: int, console: Console) -> None:
    """Serve until Ctrl-C."""
    with ReviewServer(queue, port) as server:
        console.print(
            f"review page: {server.url}  ({len(queue.pending())} pending; "
            "keys m / k / s / u; Ctrl-C to stop)"
        )
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            console.print("stopped")
