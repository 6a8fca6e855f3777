"""Two paths of a growing graph that lost work: a refused re-apply run again, and a batch
merged while its model was unreachable. Both backends, through the CLI as a user runs it."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from relmerge.data import sample_dir
from relmerge.eval.gold_judge import GoldJudge
from relmerge.io.write import RESULT_FILE
from relmerge.review.queue import ReviewQueue
from tests.storemerge.test_merge_into_cli import another_store, dump, mapping, merge_into
from tests.support.cli_process import relmerge
from tests.support.gold_judge import gold_task_handler
from tests.support.llm_server import LLMServer

SAMPLE = sample_dir() / "relations.jsonl"
OUT_FILES = ("decisions.jsonl", "clarifications.jsonl", "relation_id_mapping.json", RESULT_FILE)


def _again_under_other_ids(tmp_path: Path) -> Path:
    """The sample's records under new ids: a batch that folds into the first one's."""
    lines = []
    for line in SAMPLE.read_bytes().splitlines():
        record = orjson.loads(line)
        record["relation_id"] = "again_" + record["relation_id"]
        lines.append(orjson.dumps(record))
    path = tmp_path / "again.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _files(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in OUT_FILES}


def test_a_refused_reapply_run_again_is_refused_again_and_keeps_the_review(
    store_url: str, tmp_path: Path
) -> None:
    assert relmerge("store", "init", store_url).returncode == 0
    merge1 = tmp_path / "merge1"
    assert merge_into(store_url, merge1).returncode == 0
    later = merge_into(store_url, tmp_path / "merge2", source=_again_under_other_ids(tmp_path))
    assert later.returncode == 0, later.stderr
    queue = ReviewQueue(merge1)
    question = queue.pending()[0]
    queue.answer(question["id"], "merge")
    files, stored = _files(merge1), dump(store_url)
    for _ in range(2):  # the second try used to apply an empty batch and erase the review
        done = relmerge("review", merge1, "--apply")
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert "later batch(es) merge-" in done.stderr, done.stderr
        assert "nothing was changed" in done.stderr
        assert _files(merge1) == files
        assert dump(store_url) == stored
    assert question["id"] in ReviewQueue(merge1).answers
    clarified = [orjson.loads(line)["id"] for line in files["clarifications.jsonl"].splitlines()]
    assert question["id"] in clarified


def test_a_merge_whose_model_never_answered_exits_3_and_asks_later(
    store_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    postgres = request.getfixturevalue("postgres_server") if "postgres" in store_url else None
    assert relmerge("store", "init", store_url).returncode == 0
    out = tmp_path / "out"
    dead = ("--llm-base-url", "http://127.0.0.1:9/v1", "--llm-model", "m", "--no-preflight")
    first = merge_into(store_url, out, *dead, "--canaries", "0")
    assert first.returncode == 3, (first.stdout, first.stderr)
    assert "the LLM could not be reached" in first.stderr, first.stderr
    result = orjson.loads((out / RESULT_FILE).read_bytes())["store"]
    assert result["llm_unavailable_group_count"] > 0
    unanswered = {
        tuple(sorted(item["member_ids"]))
        for item in map(orjson.loads, (out / "clarifications.jsonl").read_bytes().splitlines())
    }
    assert unanswered
    again = merge_into(store_url, out, *dead, "--canaries", "0")  # still dead: still askable
    assert again.returncode == 3, again.stderr
    reference = another_store(store_url, tmp_path, postgres)
    assert relmerge("store", "init", reference).returncode == 0
    with LLMServer(gold_task_handler(GoldJudge({}))) as server:
        alive = ("--llm-base-url", server.base_url, "--llm-model", "m", "--canaries", "0")
        done = merge_into(store_url, out, *alive)
        assert done.returncode == 0, done.stderr
        assert server.group_requests, "the questions the dead model left were not asked"
        whole = merge_into(reference, tmp_path / "reference", *alive)
        assert whole.returncode == 0, whole.stderr
    result = orjson.loads((out / RESULT_FILE).read_bytes())["store"]
    assert result["status"] == "applied" and result["llm_unavailable_group_count"] == 0
    reasons = [
        str(orjson.loads(line)["reason"])
        for line in (out / "clarifications.jsonl").read_bytes().splitlines()
    ]
    assert not [reason for reason in reasons if "unavailable" in reason]
    assert mapping(out) == mapping(tmp_path / "reference")  # as if it had answered at once
    assert dump(store_url) == dump(reference)


def test_the_pairs_a_dead_model_left_are_pending_for_reconcile(
    store_url: str, tmp_path: Path
) -> None:
    assert relmerge("store", "init", store_url).returncode == 0
    dead = ("--llm-base-url", "http://127.0.0.1:9/v1", "--llm-model", "m", "--no-preflight")
    first = merge_into(store_url, tmp_path / "out", *dead, "--canaries", "0")
    assert first.returncode == 3, first.stderr
    assert "relmerge reconcile" in first.stderr and "--pending" in first.stderr
    with LLMServer(gold_task_handler(GoldJudge({}))) as server:
        alive = ("--llm-base-url", server.base_url, "--llm-model", "m")
        done = relmerge("reconcile", store_url, "--pending", "-o", tmp_path / "rec", *alive)
        assert done.returncode == 0, done.stderr
        assert server.group_requests, "reconcile --pending did not ask the pairs left"
