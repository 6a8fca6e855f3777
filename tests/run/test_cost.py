"""What a run costs: the server's ``usage`` summed per task into the result, characters
where a server sends none (and said so), USD at the user's prices, and ``--dry-run``'s
estimate against a real run of the dev set."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from relmerge.cli import main
from tests.support.dev_cli import DEV
from tests.support.gold_judge import dev_gold_judge, gold_task_handler
from tests.support.llm_server import LLMServer, Reply

needs_dev = pytest.mark.skipif(not DEV.is_dir(), reason="shared dev set not present")

PRICE_IN, PRICE_OUT = 0.5, 2.0


def _task(body: dict[str, Any]) -> str:
    return str(body["response_format"]["json_schema"]["name"])


def _chars(body: dict[str, Any]) -> int:
    return sum(len(message["content"]) for message in body["messages"])


class Metered:
    """A gold handler that states its own ``usage`` and keeps what it stated, by task
    (``usage=False``: it sends a completion without ``usage``, as some servers do)."""

    def __init__(self, usage: bool = True) -> None:
        self.gold = gold_task_handler(dev_gold_judge(DEV))
        self.usage = usage
        self.sent: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        reply = self.gold(body)
        prompt, completion = 7 + _chars(body) // 3, 3 + len(reply.content) // 5
        with self._lock:
            figures = self.sent[_task(body)]
            figures[0] += 1
            figures[1] += prompt
            figures[2] += completion
            figures[3] += _chars(body)
        if self.usage:
            return Reply(content=reply.content, prompt_tokens=prompt, completion_tokens=completion)
        return Reply(body=_completion_without_usage(reply.content))


def _completion_without_usage(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-nousage",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "gold",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
    }


def _run(input_path: Path, out: Path, base_url: str, *extra: str) -> dict[str, Any]:
    args = [
        "run",
        str(input_path),
        "--entity-mapping",
        str(DEV / "entity_id_mapping.json"),
        "--entities",
        str(DEV / "entities.jsonl"),
        "--output",
        str(out),
        "--embedding",
        "hash",
        "--no-cache",
        "--llm-base-url",
        base_url,
        "--llm-model",
        "gold",
        *extra,
    ]
    ran = CliRunner().invoke(main, args, env={"COLUMNS": "200"})
    assert ran.exit_code == 0, ran.stdout + ran.stderr
    result: dict[str, Any] = orjson.loads((out / "deduplicate_relations_result.json").read_bytes())
    result["_stdout"] = ran.stdout
    return result


@pytest.fixture(scope="module")
def metered_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Metered]:
    handler = Metered()
    out = tmp_path_factory.mktemp("cost") / "out"
    with LLMServer(handler=handler, per_block=False) as server:  # it meters packs as sent
        prices = ["--llm-price-in", str(PRICE_IN), "--llm-price-out", str(PRICE_OUT)]
        result = _run(DEV / "relations.jsonl", out, server.base_url, *prices)
    return result, handler


@needs_dev
def test_tokens_per_task_are_the_servers_usage(
    metered_run: tuple[dict[str, Any], Metered],
) -> None:
    result, handler = metered_run
    cost = result["cost"]
    assert cost["measured"] == "usage"
    assert set(cost["tasks"]) == set(handler.sent)
    assert "relation_cluster_many" in handler.sent  # the blocks' questions, packed
    for task, (requests, prompt, completion, chars) in handler.sent.items():
        figures = cost["tasks"][task]
        assert (figures["requests"], figures["prompt_tokens"]) == (requests, prompt)
        assert (figures["completion_tokens"], figures["prompt_chars"]) == (completion, chars)
        assert figures["unmetered"] == 0
    assert cost["prompt_tokens"] == result["tokens"]["prompt"]
    assert cost["completion_tokens"] == result["tokens"]["completion"]
    assert sum(task["requests"] for task in cost["tasks"].values()) == result["llm_requests"]


@needs_dev
def test_prices_turn_tokens_into_money(metered_run: tuple[dict[str, Any], Metered]) -> None:
    result, _ = metered_run
    cost = result["cost"]
    expected = (cost["prompt_tokens"] * PRICE_IN + cost["completion_tokens"] * PRICE_OUT) / 1e6
    assert cost["usd"] == pytest.approx(expected, abs=1e-5)
    assert cost["price_in_usd_per_million"] == PRICE_IN
    assert all(task["usd"] is not None for task in cost["tasks"].values())
    assert "cost, USD at 0.5 / 2 per million" in result["_stdout"]
    assert "relation_cluster_many: prompt / completion tokens" in result["_stdout"]


@needs_dev
def test_without_usage_characters_are_counted_and_said(tmp_path: Path) -> None:
    lines = (DEV / "relations.jsonl").read_text(encoding="utf-8").splitlines()
    input_path = tmp_path / "part.jsonl"
    input_path.write_text("\n".join(lines[:120]) + "\n", encoding="utf-8")
    handler = Metered(usage=False)
    with LLMServer(handler=handler, per_block=False) as server:
        result = _run(input_path, tmp_path / "out", server.base_url, "--llm-price-in", "1")
    cost = result["cost"]
    assert handler.sent, "the sample asks the model something"
    assert cost["measured"] == "characters"
    assert cost["prompt_tokens"] == 0
    for task, (requests, _, _, chars) in handler.sent.items():
        figures = cost["tasks"][task]
        assert figures["unmetered"] == requests
        assert figures["prompt_chars"] == figures["unmetered_prompt_chars"] == chars
    assert cost["usd"] is None  # one price alone says nothing in money
    assert "characters: no usage" in result["_stdout"]


def test_a_cached_answer_is_saved_not_spent() -> None:
    from relmerge.providers.accounting import LLMStats
    from relmerge.providers.base import LLMRequest, LLMResult, Message, Usage
    from relmerge.run.cost import cost_of

    stats = LLMStats()
    request = LLMRequest("relation_judge", (Message("system", "abcd"), Message("user", "ef")), {})
    stats.task("relation_judge").add(request, LLMResult("{}", {}, "m", Usage(10, 2)))
    stats.task("relation_judge").add(request, LLMResult("{}", {}, "m", Usage(10, 2), cached=True))
    cost = cost_of(stats).priced(1.0, 1.0)
    task = cost.tasks["relation_judge"]
    assert (task.requests, task.prompt_tokens, task.cache_hits) == (1, 10, 1)
    assert (task.saved_prompt_tokens, task.saved_completion_tokens) == (10, 2)
    assert cost.usd == pytest.approx(12 / 1e6)
    assert cost.saved_usd == pytest.approx(12 / 1e6)


@needs_dev
def test_dry_run_estimates_within_a_factor_of_a_real_run(
    metered_run: tuple[dict[str, Any], Metered],
) -> None:
    result, _ = metered_run
    args = [
        "run",
        str(DEV / "relations.jsonl"),
        "--entity-mapping",
        str(DEV / "entity_id_mapping.json"),
        "--entities",
        str(DEV / "entities.jsonl"),
        "--output",
        "unused-out",
        "--dry-run",
        "--llm-base-url",
        "http://127.0.0.1:9/v1",
        "--llm-model",
        "gold",
    ]
    ran = CliRunner().invoke(main, args, env={"COLUMNS": "200"})
    assert ran.exit_code == 0, ran.stdout + ran.stderr
    line = next(x for x in ran.stdout.splitlines() if "estimate: LLM requests, tokens" in x)
    requests, tokens = (int(n.replace(",", "")) for n in line.split("│")[2].split(", "))
    real_tokens = (result["cost"]["prompt_chars"] + result["cost"]["completion_chars"]) / 4
    assert result["llm_requests"] / 2 <= requests <= result["llm_requests"] * 2
    assert real_tokens / 2 <= tokens <= real_tokens * 2
