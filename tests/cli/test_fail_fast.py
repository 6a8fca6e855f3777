"""Fail loudly and safely: an endpoint that is not there, or is not an LLM, stops a run
before any work (exit 2, one line); one that dies mid-run opens the circuit breaker (exit
3, the groups left written for review, asked again by the next run).

Endpoints are real: free ports nobody listens on, the loopback LLM server answering what a
wrong endpoint answers, a plain HTTP file server.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from relmerge import DeduplicateRelations, DeduplicateRelationsConfig, DictContext
from relmerge.cli import main
from relmerge.data import sample_dir
from relmerge.errors import ProviderError
from relmerge.eval.gold_judge import GoldJudge
from relmerge.providers.openai_compat import OpenAICompatibleModel
from relmerge.providers.openai_embed import OpenAIEmbedder
from relmerge.stores import MemoryStore
from tests.cli.test_run_cli import DEV, check_outputs, needs_dev
from tests.factories import record, run_step
from tests.support.dev_cli import dev_run_args, run_outputs
from tests.support.gold_judge import dev_gold_judge, gold_task_handler
from tests.support.llm_server import PREFLIGHT_OK, LLMServer, Reply

EXAMPLE = sample_dir()
KEY = "sk-test-0123456789abcdef"


def free_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def sample_args(out: Path, *extra: str) -> list[str]:
    return [
        "run",
        str(EXAMPLE / "relations.jsonl"),
        "--entity-mapping",
        str(EXAMPLE / "entity_id_mapping.json"),
        "--entities",
        str(EXAMPLE / "entities.jsonl"),
        "--output",
        str(out),
        "--embedding",
        "hash",
        "-q",
        *extra,
    ]


def checked(out: Path, source: Path) -> dict[str, Any]:
    """The run's result, once the invariants every run keeps are checked."""
    check_outputs(out, source)
    result: dict[str, Any] = orjson.loads((out / "deduplicate_relations_result.json").read_bytes())
    return result


def invoke(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(main, args, env={"OPENAI_API_KEY": KEY})
    return result.exit_code, result.output


@pytest.fixture
def file_server() -> Iterator[str]:
    """A plain web server (Python's file server): it answers POST with 501."""

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


# The preflight: wrong or dead endpoints -----------------------------------------------

# (what the endpoint answers the preflight with, words the one line must hold)
WRONG_ANSWERS: dict[str, tuple[Reply, str]] = {
    "404": (Reply(status=404), "HTTP 404"),
    "405": (Reply(status=405), "does not accept POST"),
    "401": (Reply(status=401), "API key was refused"),
    "403": (Reply(status=403), "API key was refused"),
    "400 on the response format": (Reply(status=400), "response format"),
    "not a chat completion": (Reply(body={"status": "ok"}), "not a chat completion"),
    "HTML": (Reply(body=b"<html>It works!</html>", headers={"Content-Type": "text/html"}), ""),
}


@pytest.mark.parametrize("case", list(WRONG_ANSWERS))
def test_an_endpoint_that_is_not_an_llm_stops_the_run_before_any_work(
    case: str, tmp_path: Path
) -> None:
    reply, words = WRONG_ANSWERS[case]
    out = tmp_path / "out"
    with LLMServer(preflight=reply) as server:
        url = server.base_url
        code, text = invoke(sample_args(out, "--llm-base-url", url, "--llm-model", "m"))
        group_requests = server.group_requests
        checks = server.preflight_count
    assert code == 2, text
    lines = text.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: LLM endpoint {url}: ")
    assert words in lines[0]
    assert KEY not in text and "Traceback" not in text
    assert checks == 1  # one request, no retry: nothing a starting server answers
    assert group_requests == []  # no group was asked
    assert not out.exists()  # nothing written, not even the cache


def test_an_endpoint_that_never_answers_times_out(tmp_path: Path) -> None:
    with LLMServer(preflight=Reply(delay=5.0)) as server:
        url = server.base_url
        args = ["--llm-base-url", url, "--llm-model", "m", "--llm-timeout", "0.3"]
        code, text = invoke(sample_args(tmp_path / "out", *args))
        assert server.group_requests == []
    assert code == 2
    assert f"error: LLM endpoint {url}: no answer within 0.3 s" in text


def test_a_plain_web_server_is_not_an_llm(file_server: str, tmp_path: Path) -> None:
    code, text = invoke(
        sample_args(tmp_path / "out", "--llm-base-url", file_server, "--llm-model", "m")
    )
    assert code == 2
    assert f"error: LLM endpoint {file_server}: HTTP 501" in text
    assert "OpenAI-compatible" in text


@pytest.mark.parametrize(
    ("base_url", "words"),
    [
        ("http://127.0.0.1:{port}/v1", "connection refused (retried for"),
        ("127.0.0.1:{port}/v1", "did you mean 'http://127.0.0.1:{port}/v1'"),
        ("localhost:{port}/v1", "needs an http:// or https:// scheme"),
        ("http://relmerge-no-such-host.invalid/v1", "host 'relmerge-no-such-host.invalid' not"),
    ],
    ids=["refused", "no scheme", "no scheme, host name", "unknown host"],
)
def test_an_endpoint_that_is_not_there_exits_2_with_what_to_check(
    base_url: str, words: str, tmp_path: Path
) -> None:
    port = free_port()
    url = base_url.format(port=port)
    out = tmp_path / "out"
    args = ["--llm-base-url", url, "--llm-model", "m", "--startup-wait", "0.5"]
    code, text = invoke(sample_args(out, *args))
    assert code == 2, text
    assert words.format(port=port) in text
    assert len(text.strip().splitlines()) == 1 and "Traceback" not in text
    assert not out.exists()


def test_tls_to_a_plain_http_server_fails_the_handshake(tmp_path: Path) -> None:
    with LLMServer() as server:
        url = f"https://127.0.0.1:{server.port}/v1"
        code, text = invoke(
            sample_args(tmp_path / "out", "--llm-base-url", url, "--llm-model", "m")
        )
    assert code == 2
    assert "TLS handshake failed" in text and "https://" in text


def test_a_server_still_starting_is_waited_for(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with LLMServer(handler=gold_task_handler(GoldJudge({})), preflight=None) as server:
        # Two "loading the model" answers, then the preflight's answer.
        server.enqueue(Reply(status=503), Reply(status=503), PREFLIGHT_OK)
        code, text = invoke(sample_args(out, "--llm-base-url", server.base_url, "--llm-model", "m"))
        sent = len(server.requests)
    assert code == 0, text
    result = checked(out, EXAMPLE / "relations.jsonl")
    assert result["preflight_requests"] == 3
    assert result["llm_requests"] == sent - 3 > 0  # the preflight is not in the run's count


def test_dry_run_and_no_preflight_send_no_check(tmp_path: Path) -> None:
    with LLMServer(handler=gold_task_handler(GoldJudge({}))) as server:
        args = ["--llm-base-url", server.base_url, "--llm-model", "m"]
        code, text = invoke(sample_args(tmp_path / "dry", *args, "--dry-run"))
        assert code == 0, text
        assert server.requests == []
        code, text = invoke(sample_args(tmp_path / "out", *args, "--no-preflight"))
        assert code == 0, text
        assert server.preflight_count == 0 and server.group_requests
    result = orjson.loads((tmp_path / "out" / "deduplicate_relations_result.json").read_bytes())
    assert result["preflight_requests"] == 0


def test_llm_none_with_a_base_url_is_a_usage_error(tmp_path: Path) -> None:
    code, text = invoke(sample_args(tmp_path / "out", "--llm", "none", "--llm-base-url", "x"))
    assert code == 2
    assert "--llm none and --llm-base-url exclude each other" in text


def test_a_dead_embeddings_endpoint_stops_the_run(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    args = ["--embedding", "openai", "--embedding-base-url", url, "--embedding-model", "e"]
    code, text = invoke([*sample_args(tmp_path / "out"), *args, "--startup-wait", "0"])
    assert code == 2
    assert f"error: embeddings endpoint {url}: connection refused" in text


def test_judge_checks_its_endpoint_first() -> None:
    with LLMServer(preflight=Reply(status=404)) as server:
        result = CliRunner().invoke(
            main,
            [
                *("judge", "--candidate", "ally", "--existing", "enemy", "--embedding", "hash"),
                *("--llm-base-url", server.base_url, "--llm-model", "m"),
            ],
        )
        assert server.group_requests == []
    assert result.exit_code == 2
    assert "HTTP 404" in result.output


class CountingStore(MemoryStore):
    """A memory store that counts every read and write."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    async def get(self, key: str) -> bytes:
        self.calls += 1
        return await super().get(key)

    async def put(self, key: str, data: bytes) -> None:
        self.calls += 1
        await super().put(key, data)


async def test_the_step_raises_the_provider_error_before_reading_or_writing() -> None:
    store = CountingStore()
    store.objects["relations/r1.json"] = orjson.dumps(record("r1"))
    with LLMServer(preflight=Reply(status=401)) as server:
        model = OpenAICompatibleModel(base_url=server.base_url, model="m", api_key=KEY)
        context = DictContext(
            {"stores.objects": store, "models.language": model},
            {"relation_keys": ["relations/r1.json"], "entity_id_mapping": {}},
        )
        step = DeduplicateRelations(DeduplicateRelationsConfig(semantic_merge=False))
        with pytest.raises(ProviderError, match="API key was refused") as caught:
            await step.run(context)
        await model.aclose()
        assert server.group_requests == []
    assert KEY not in str(caught.value)
    assert store.calls == 0 and list(store.objects) == ["relations/r1.json"]


async def test_the_step_checks_the_embeddings_endpoint_too() -> None:
    embedder = OpenAIEmbedder(base_url=f"http://127.0.0.1:{free_port()}/v1", model="e")
    embedder.startup_wait = 0
    context = DictContext(
        {"stores.objects": MemoryStore(), "models.language": None, "models.embedding": embedder},
        {"relation_keys": [], "entity_id_mapping": {}},
    )
    with pytest.raises(ProviderError, match=r"embeddings endpoint .* connection refused"):
        await DeduplicateRelations().run(context)


# The circuit breaker: an endpoint that dies mid-run ---------------------------------------


async def test_the_step_returns_its_output_with_the_issues_when_the_llm_dies() -> None:
    """The Python API does not raise for an endpoint that stops answering after the
    preflight: the groups keep their records, each with the issue ``llm_unavailable``."""
    records = [
        record(f"r{group}{i}", target_entity_id=f"e{group}", description=f"Fact {group}.{i}.")
        for group in range(3)
        for i in range(2)
    ]
    with LLMServer(handler=lambda body: Reply(drop=True)) as server:
        model = OpenAICompatibleModel(base_url=server.base_url, model="m", max_retries=0)
        output, _, _ = await run_step(records, model, llm_breaker_groups=1, concurrency=1)
        await model.aclose()
        sent = len(server.group_requests)
    result = output.result
    assert result["preflight_requests"] == 1
    assert result["llm_circuit_breaker"]["open"] is True
    assert sent == 3  # the first group's three tries; the other two were never sent
    assert result["llm_unavailable_group_count"] == 3 == len(output.issues)
    assert {issue.code for issue in output.issues} == {"llm_unavailable"}
    assert sorted(output.relation_id_mapping) == sorted(r["relation_id"] for r in records)


class Switch:
    """A handler that answers like ``inner`` while ``alive``, and drops every connection
    (a dead server behind a live port) once it is not."""

    def __init__(self, inner: Any, alive_for: int) -> None:
        self.inner = inner
        self.alive_for = alive_for
        self.answered = 0
        self.dropped = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            alive = self.answered < self.alive_for
            if alive:
                self.answered += 1
            else:
                self.dropped += 1
        return self.inner(body) if alive else Reply(drop=True)


def questions(out: Path) -> list[str]:
    """The ids of the clarifications written into OUT, sorted."""
    with (out / "clarifications.jsonl").open("rb") as lines:
        return sorted(orjson.loads(line)["id"] for line in lines)


def write_config(tmp_path: Path) -> Path:
    """No transport retries inside a request: each question fails in three quick tries."""
    config = tmp_path / "fast.toml"
    config.write_text("[llm]\nmax_retries = 0\n")
    return config


def test_an_endpoint_dead_after_the_preflight_exits_3_with_the_pairs_for_review(
    tmp_path: Path,
) -> None:
    rules = tmp_path / "rules"
    assert invoke(sample_args(rules, "--llm", "none"))[0] == 0
    out = tmp_path / "out"
    switch = Switch(gold_task_handler(GoldJudge({})), alive_for=0)
    with LLMServer(handler=switch) as server:
        args = ["--llm-base-url", server.base_url, "--llm-model", "m"]
        args += ["--config", str(write_config(tmp_path))]
        args += ["--llm-breaker-groups", "2", "--concurrency", "1"]
        args += ["--llm-pack-tokens", "0"]  # counts the tries of questions asked one by one
        code, text = invoke(sample_args(out, *args))
        assert code == 3, text
        result = checked(out, EXAMPLE / "relations.jsonl")  # complete, nothing lost
        left = result["llm_unavailable_group_count"]
        assert left > 2  # the two that tripped the breaker, and those never asked
        assert text.strip().splitlines()[-1] == (
            f"completed, but the LLM was unavailable for {left} groups — run the same "
            "command again to ask them; answers so far are cached"
        )
        assert result["llm_circuit_breaker"]["open"] is True
        assert switch.dropped == 2 * 3  # two questions of three tries each, then nothing
        assert result["llm_requests"] == result["llm_failed_requests"] == 6
        codes = {issue["code"] for issue in result["issues"]}
        assert "llm_unavailable" in codes and "deduplication_failed" not in codes
        # What is kept, and what is written for a person, is a run without an LLM's.
        assert run_outputs(out) == run_outputs(rules)
        ids = [orjson.loads(line)["id"] for line in (out / "clarifications.jsonl").open("rb")]
        expected = [
            orjson.loads(line)["id"] for line in (rules / "clarifications.jsonl").open("rb")
        ]
        assert sorted(ids) == sorted(expected) and ids

        # The endpoint is back: the same command asks the groups left, and completes.
        switch.alive_for = 10_000
        code, text = invoke(sample_args(out, *args))
        assert code == 0, text
        again = checked(out, EXAMPLE / "relations.jsonl")
        assert again["llm_unavailable_group_count"] == 0 and again["llm_requests"] > 0


@pytest.mark.parametrize(
    ("handler", "extra", "code"),
    [
        (
            gold_task_handler(GoldJudge({})),
            # One question a request: a packed request would decide the sample within budget.
            ["--max-llm-requests", "1", "--llm-pack-tokens", "0"],
            "llm_budget_exhausted",
        ),
        (lambda body: Reply(content="I cannot help with that."), [], "deduplication_failed"),
    ],
    ids=["budget spent", "invalid answers"],
)
def test_a_spent_budget_or_invalid_answers_still_exit_0(
    handler: Any, extra: list[str], code: str, tmp_path: Path
) -> None:
    """What the user asked for (a budget) and a model that answers badly are issues of a
    completed run, not an unavailable LLM."""
    out = tmp_path / "out"
    with LLMServer(handler=handler) as server:
        args = ["--llm-base-url", server.base_url, "--llm-model", "m", *extra]
        status, text = invoke(sample_args(out, *args, "--llm-breaker-groups", "1"))
    assert status == 0, text
    result = checked(out, EXAMPLE / "relations.jsonl")
    codes = {issue["code"] for issue in result["issues"]}
    assert code in codes and "llm_unavailable" not in codes
    assert result["llm_circuit_breaker"]["open"] is False


@needs_dev
def test_a_run_whose_endpoint_died_resumes_to_the_outputs_of_an_uninterrupted_run(
    tmp_path: Path,
) -> None:
    judge = gold_task_handler(dev_gold_judge(DEV))
    with LLMServer(handler=judge) as reference_server:
        reference = tmp_path / "reference"
        args = dev_run_args(reference, reference_server.base_url, 2, "--no-cache")
        assert invoke(args)[0] == 0
    switch = Switch(judge, alive_for=20)
    with LLMServer(handler=switch) as server:
        out = tmp_path / "out"
        args = dev_run_args(out, server.base_url, 2, "--config", str(write_config(tmp_path)))
        args += ["--llm-pack-tokens", "0"]  # the bound below counts questions asked one by one
        code, text = invoke(args)
        assert code == 3, text
        died = checked(out, DEV / "relations.jsonl")
        assert died["llm_unavailable_group_count"] > 0
        # Requests after it died: five questions in a row, three tries each, trip the
        # breaker; an answer sent before the death but received after some of them restarts
        # the count (at most once per request in flight, --concurrency 2); then nothing.
        assert 5 * 3 <= switch.dropped <= (5 + 5 * 2) * 3
        switch.alive_for = 10_000
        code, text = invoke(args)
        assert code == 0, text
    assert run_outputs(out) == run_outputs(reference)
