"""Review: queue persistence, the terminal review in a pseudo-terminal, the browser page."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from relmerge.data import sample_dir
from relmerge.review.queue import ReviewQueue
from tests.support.browser import CHROMIUM, launch_chromium

EXAMPLE = sample_dir()
RELMERGE = [sys.executable, "-m", "relmerge"]


def run_sample(out: Path) -> dict[str, str]:
    subprocess.run(
        [
            *RELMERGE,
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
        ],
        check=True,
    )
    mapping: dict[str, str] = orjson.loads((out / "relation_id_mapping.json").read_bytes())
    return mapping


@pytest.fixture
def reviewed_run(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    run_sample(out)
    assert ReviewQueue(out).pending(), "the sample should leave questions for a person"
    return out


def test_answers_persist_across_processes_and_undo(reviewed_run: Path) -> None:
    queue = ReviewQueue(reviewed_run)
    first, second = queue.pending()[:2]
    queue.answer(first["id"], "merge")
    queue.answer(second["id"], "keep_both")
    queue.undo(second["id"])
    reloaded = ReviewQueue(reviewed_run)  # as another process would
    assert reloaded.answers == {first["id"]: "merge"}
    assert second["id"] in [q["id"] for q in reloaded.pending()]


def test_terminal_review_in_a_pty_changes_the_next_run(reviewed_run: Path) -> None:
    import pexpect

    before = orjson.loads((reviewed_run / "relation_id_mapping.json").read_bytes())
    pending = ReviewQueue(reviewed_run).pending()
    child = pexpect.spawn(
        RELMERGE[0],
        [*RELMERGE[1:], "review", str(reviewed_run)],
        env={**os.environ, "COLUMNS": "120", "TERM": "dumb", "NO_COLOR": "1"},
        encoding="utf-8",
        timeout=30,
    )
    child.expect("question 1 of")
    child.expect(r"\[m\] merge")
    child.send("m")  # one key press, no Enter
    child.expect("→ merge")
    child.expect(r"\[m\] merge")
    child.send("q")
    child.expect("1 answered")
    child.expect(r"Apply the 1 answer now\? \[Y/n\]")
    child.send("n")  # not now: the next run applies it
    child.expect(pexpect.EOF)
    answers = ReviewQueue(reviewed_run).answers
    assert answers == {pending[0]["id"]: "merge"}

    after = run_sample(reviewed_run)
    members = pending[0]["member_ids"]
    assert len({after[m] for m in members}) == 1
    assert len({before[m] for m in members}) > 1
    decisions = (reviewed_run / "decisions.jsonl").read_text()
    assert '"tier":"remembered"' in decisions
    # The answer is remembered: the question is not asked again.
    assert pending[0]["id"] not in [q["id"] for q in ReviewQueue(reviewed_run).questions]


def test_review_without_questions_is_a_clear_error(tmp_path: Path) -> None:
    result = subprocess.run([*RELMERGE, "review", str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 2 and "clarifications.jsonl" in result.stderr


@pytest.mark.skipif(
    not Path(CHROMIUM).exists() and not os.environ.get("CI"),
    reason="Debian's chromium is not installed (scripts/test.sh installs it)",
)
def test_web_review_in_a_real_browser(reviewed_run: Path) -> None:
    from playwright.sync_api import sync_playwright

    from relmerge.review.web import ReviewServer

    queue = ReviewQueue(reviewed_run)
    pending = queue.pending()
    with ReviewServer(queue) as server, sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        page = browser.new_page()
        page.goto(server.url)
        page.wait_for_selector("#current")
        assert page.locator("#left").get_attribute("data-left") == str(len(pending))
        assert page.locator("#current").get_attribute("data-question-id") == pending[0]["id"]
        assert pending[0]["records"][0]["description"] in page.content()
        page.keyboard.press("k")
        page.wait_for_selector("#status:has-text('saved: keep_both')")
        assert page.locator("#left").get_attribute("data-left") == str(len(pending) - 1)
        page.keyboard.press("m")
        page.wait_for_selector("#status:has-text('saved: merge')")
        page.keyboard.press("u")
        page.wait_for_selector("#status:has-text('undone')")
        page.screenshot(path=str(reviewed_run / "review.png"))
        browser.close()
    stored = ReviewQueue(reviewed_run).answers
    assert stored == {pending[0]["id"]: "keep_both"}


def test_a_torn_last_answer_is_skipped_and_the_next_one_kept(tmp_path: Path) -> None:
    """A process killed mid-append leaves half a line; the memory still loads and grows."""
    from relmerge.review.memory import AnswerMemory

    path = tmp_path / "answer_memory.jsonl"
    AnswerMemory(path).remember("k1", "merge")
    with path.open("ab") as handle:
        handle.write(b'{"key": "k2", "ans')
    memory = AnswerMemory(path)
    assert memory.get("k1") == "merge" and memory.get("k2") is None
    memory.remember("k3", "keep_both")
    again = AnswerMemory(path)
    assert again.get("k1") == "merge" and again.get("k3") == "keep_both"


def _question(question_id: str, first: str, second: str) -> dict[str, Any]:
    def relation(relation_id: str, text: str) -> dict[str, Any]:
        return {"relation_id": relation_id, "type": "t", "name": text, "description": text}

    entities = [{"entity_id": "a", "name": "A"}, {"entity_id": "b", "name": "B"}]
    return {
        "id": question_id,
        "member_ids": ["r1", "r2"],
        "records": [relation("r1", first), relation("r2", second)],
        "context": {"entities": entities},
    }


def test_the_memory_follows_the_answers_latest_wins_and_forgetting(tmp_path: Path) -> None:
    from relmerge.review.memory import AnswerMemory
    from relmerge.review.queue import MEMORY_FILE, run_memory

    queue = ReviewQueue(tmp_path)
    queue.add(_question("clarify_1", "ally", "friend"))
    queue.add(_question("clarify_2", "rival", "enemy"))
    queue.answer("clarify_1", "merge")
    queue.answer("clarify_2", "keep_both")
    memory = run_memory(tmp_path)
    assert sorted(memory.get(k) or "" for k in memory.remembered_keys()) == ["keep_both", "merge"]
    (tmp_path / "clarifications.jsonl").unlink()  # a later run replaced the questions

    revised = ReviewQueue(tmp_path)
    assert [q["id"] for q in revised.to_review(revise=True)] == ["clarify_1", "clarify_2"]
    revised.answer("clarify_1", "keep_both")  # the copy kept with the answer is enough
    memory = run_memory(tmp_path)
    assert {memory.get(k) for k in memory.remembered_keys()} == {"keep_both"}

    revised.forget(["clarify_2"])
    memory = run_memory(tmp_path)
    assert [memory.question_of(k) for k in memory.remembered_keys()] == ["clarify_1"]
    (tmp_path / "answers.jsonl").unlink()  # deleting the file forgets the rest
    assert len(run_memory(tmp_path)) == 0
    assert len(AnswerMemory(tmp_path / MEMORY_FILE)) == 0  # as the file says


def test_an_answer_kept_by_another_question_survives_forgetting_the_first(tmp_path: Path) -> None:
    from relmerge.review.queue import run_memory

    queue = ReviewQueue(tmp_path)
    queue.add(_question("clarify_1", "ally", "friend"))
    queue.answer("clarify_1", "merge")
    run_memory(tmp_path)
    same_pair = _question("clarify_9", "ally", "friend") | {"member_ids": ["r7", "r8"]}
    queue.add(same_pair)
    queue.answer("clarify_9", "merge")
    queue.forget(["clarify_1"])
    memory = run_memory(tmp_path)
    [key] = memory.remembered_keys()
    assert (memory.get(key), memory.question_of(key)) == ("merge", "clarify_9")


def test_secrets_of_a_command_line_are_hidden() -> None:
    from relmerge.review.rerun import redact_argv

    argv = [
        *("run", "s3://user:pa55@bucket/in.jsonl", "--output", "out"),
        *("--storage-option", "key=abc", "--storage-option=secret=xyz"),
        *("--llm-base-url", "https://host/v1?api_key=k3y&model=m", "--llm-api-key-env", "MY_KEY"),
    ]
    shown, hidden = redact_argv(argv)
    assert hidden
    assert shown == [
        *("run", "s3://<hidden>@bucket/in.jsonl", "--output", "out"),
        *("--storage-option", "key=<hidden>", "--storage-option=secret=<hidden>"),
        *("--llm-base-url", "https://host/v1?api_key=<hidden>&model=m"),
        *("--llm-api-key-env", "MY_KEY"),
    ]
    assert redact_argv(["run", "in.jsonl", "--output", "out"]) == (
        ["run", "in.jsonl", "--output", "out"],
        False,
    )


def test_a_database_user_alone_is_no_secret() -> None:
    """A PostgreSQL URL with a user and no password (peer authentication) can be run
    again as recorded; its password, where there is one, is hidden."""
    from relmerge.review.rerun import redact_argv

    peer = "postgresql://relmerge@/graph?host=/tmp/sock"
    assert redact_argv(["merge-into", peer, "in.jsonl"]) == (
        ["merge-into", peer, "in.jsonl"],
        False,
    )
    shown, hidden = redact_argv(["merge-into", "postgresql://ann:pw@db/graph", "in.jsonl"])
    assert hidden and shown[1] == "postgresql://<hidden>@db/graph"
    shown, hidden = redact_argv(["run", "s3://token@bucket/in.jsonl", "-o", "out"])
    assert hidden and shown[1] == "s3://<hidden>@bucket/in.jsonl"
