"""Review: queue persistence, the terminal review in a pseudo-terminal, the browser page."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
