"""Requests another site's page could make a browser send to the review page, and a raw
HTTP client to send them: shared by ``tests/review/test_web_security.py`` and
``bench/fail_fast.py``."""

from __future__ import annotations

import http.client

import orjson

from relmerge.review.web import TOKEN_HEADER, ReviewServer

Request = tuple[str, str, dict[str, str], bytes | None]  # method, path, headers, body


def send(
    server: ReviewServer,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes | None = None,
) -> tuple[int, bytes]:
    """One raw request; ``headers`` are sent as given (``Host`` included)."""
    port = int(server.url.rsplit(":", 1)[1].strip("/"))
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def own(server: ReviewServer) -> dict[str, str]:
    """What the page itself sends: its Host and its token."""
    return {"Host": server.url.split("/")[2], TOKEN_HEADER: server.token}


def answer_body(server: ReviewServer) -> bytes:
    question = server.queue.pending()[0]
    return orjson.dumps({"id": question["id"], "answer": "merge"})


def forged_requests(
    server: ReviewServer,
) -> dict[str, tuple[str, str, dict[str, str], bytes | None]]:
    """What another site's page (or its DNS-rebound name) can make a browser send."""
    port = server.url.split(":")[2].strip("/")
    host = f"127.0.0.1:{port}"
    body = answer_body(server)
    json = {"Content-Type": "application/json"}
    token = {TOKEN_HEADER: server.token}
    return {
        "rebound Host, the page": ("GET", "/", {"Host": f"evil.example:{port}"}, None),
        "rebound Host, the state": ("GET", "/api/state", {"Host": f"evil.example:{port}"}, None),
        "rebound Host, an answer": (
            "POST",
            "/api/answer",
            {"Host": f"evil.example:{port}", **json, **token},
            body,
        ),
        "lookalike Host": (
            "GET",
            "/api/state",
            {"Host": f"127.0.0.1.evil.example:{port}", **token},
            None,
        ),
        "other port": ("GET", "/api/state", {"Host": "127.0.0.1:1", **token}, None),
        "no Host": ("GET", "/api/state", {**token}, None),
        "two Hosts": ("GET", "/api/state", {"Host": host, "host": "evil.example", **token}, None),
        "other Origin": (
            "POST",
            "/api/answer",
            {"Host": host, "Origin": "http://evil.example", **json, **token},
            body,
        ),
        "null Origin": (
            "POST",
            "/api/answer",
            {"Host": host, "Origin": "null", **json, **token},
            body,
        ),
        "other Origin, the state": (
            "GET",
            "/api/state",
            {"Host": host, "Origin": "https://evil.example", **token},
            None,
        ),
        "no token, an answer": ("POST", "/api/answer", {"Host": host, **json}, body),
        "no token, the state": ("GET", "/api/state", {"Host": host}, None),
        "wrong token": (
            "POST",
            "/api/answer",
            {"Host": host, **json, TOKEN_HEADER: "x" * 43},
            body,
        ),
        "text/plain": (
            "POST",
            "/api/answer",
            {"Host": host, "Content-Type": "text/plain", **token},
            body,
        ),
        "form": (
            "POST",
            "/api/answer",
            {"Host": host, "Content-Type": "application/x-www-form-urlencoded", **token},
            body,
        ),
        "no content type": ("POST", "/api/answer", {"Host": host, **token}, body),
        "text/plain undo": (
            "POST",
            "/api/undo",
            {"Host": host, "Content-Type": "text/plain"},
            body,
        ),
    }
