"""The review page answers its own page only: raw HTTP requests that a page of another site
could send (forged Host through DNS rebinding, another Origin, no token, a text/plain or
form body) are refused, and none of them records an answer or reads a question."""

from __future__ import annotations

import http.client
import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from relmerge.cli import main
from relmerge.review.queue import ANSWERS_FILE, ReviewQueue
from relmerge.review.web import TOKEN_HEADER, ReviewServer
from tests.review.test_review import run_sample
from tests.support.review_forgery import answer_body, forged_requests, own, send


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("review") / "out"
    run_sample(out)
    return out


@pytest.fixture
def server(reviewed: Path) -> Iterator[ReviewServer]:
    (reviewed / ANSWERS_FILE).unlink(missing_ok=True)
    with ReviewServer(ReviewQueue(reviewed)) as started:
        yield started


def test_every_forged_request_is_refused_and_records_nothing(
    server: ReviewServer, reviewed: Path
) -> None:
    graph_text = server.queue.pending()[0]["records"][0]["description"].encode()
    forged = forged_requests(server)
    for case, (method, path, headers, body) in forged.items():
        status, answer = send(server, method, path, headers, body)
        assert status in (403, 415), (case, status, answer)
        assert graph_text not in answer and server.token.encode() not in answer, case
    assert ReviewQueue(reviewed).answers == {}
    assert not (reviewed / ANSWERS_FILE).exists() or not (reviewed / ANSWERS_FILE).read_bytes()

    # The page's own requests still work: the refusals above were not a broken server.
    status, page = send(server, "GET", "/", {"Host": own(server)["Host"]})
    assert status == 200 and server.token.encode() in page
    status, state = send(server, "GET", "/api/state", own(server))
    assert status == 200 and graph_text in state
    json = {"Content-Type": "application/json; charset=utf-8"}
    status, _ = send(server, "POST", "/api/answer", {**own(server), **json}, answer_body(server))
    assert status == 200
    assert len(ReviewQueue(reviewed).answers) == 1


@pytest.mark.parametrize("name", ["localhost", "[::1]", "LOCALHOST"])
def test_the_other_loopback_names_are_the_page_too(server: ReviewServer, name: str) -> None:
    port = server.url.split(":")[2].strip("/")
    status, _ = send(
        server, "GET", "/api/state", {"Host": f"{name}:{port}", TOKEN_HEADER: server.token}
    )
    assert status == 200


def test_each_session_has_its_own_token_and_the_page_locks_itself_down(reviewed: Path) -> None:
    with (
        ReviewServer(ReviewQueue(reviewed)) as first,
        ReviewServer(ReviewQueue(reviewed)) as second,
    ):
        assert first.token != second.token and len(first.token) >= 32
        status, _ = send(second, "GET", "/api/state", {**own(second), TOKEN_HEADER: first.token})
        assert status == 403
        port = first.url.split(":")[2].strip("/")
        connection = http.client.HTTPConnection("127.0.0.1", int(port), timeout=10)
        connection.request("GET", "/")
        response = connection.getresponse()
        page = response.read().decode()
        policy = response.getheader("content-security-policy") or ""
        connection.close()
    assert "frame-ancestors 'none'" in policy and response.getheader("x-frame-options") == "DENY"
    nonce = re.search(r"script-src 'nonce-([^']+)'", policy)
    assert nonce is not None and f'<script nonce="{nonce.group(1)}">' in page


def test_it_listens_on_loopback_only_with_no_way_to_bind_elsewhere(reviewed: Path) -> None:
    with ReviewServer(ReviewQueue(reviewed)) as server:
        assert server._server.server_address[0] == "127.0.0.1"
    assert set(inspect.signature(ReviewServer).parameters) == {"queue", "port", "revise"}
    help_text = CliRunner().invoke(main, ["review", "--help"]).output
    assert "--port" in help_text
    assert not re.search(r"--(host|bind|address|listen)\b", help_text)
