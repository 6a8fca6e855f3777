"""A review a person can finish, revise and undo, driven as a person does: `relmerge review`
in a pseudo-terminal (one key per answer, Ctrl-C, the apply prompt) or with piped keys,
then the run that applies the answers."""

from __future__ import annotations

import http.client
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from relmerge.review.memory import AnswerMemory
from relmerge.review.queue import ANSWERS_FILE, MEMORY_FILE, ReviewQueue
from relmerge.review.rerun import recorded_command
from relmerge.review.web import TOKEN_HEADER, ReviewServer
from tests.review.test_review import RELMERGE, run_sample
from tests.support.browser import CHROMIUM, launch_chromium

pexpect = pytest.importorskip("pexpect")


@pytest.fixture
def out(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    run_sample(folder)
    assert len(ReviewQueue(folder).pending()) >= 3, "the sample leaves questions for a person"
    return folder


def spawn(*args: str) -> Any:
    """`relmerge ARGS` in a pseudo-terminal, as a person runs it."""
    return pexpect.spawn(
        RELMERGE[0],
        [*RELMERGE[1:], *args],
        env={**os.environ, "COLUMNS": "200", "TERM": "dumb", "NO_COLOR": "1"},
        encoding="utf-8",
        timeout=60,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal's
    )


def keys_shown(child: Any) -> None:
    """Wait for the line of keys under a question: the review waits for a key press."""
    child.expect(r"\[q\] quit\r?\n")


def review(out: Path, *args: str, keys: str = "") -> subprocess.CompletedProcess[str]:
    """`relmerge review OUT ARGS` with ``keys`` piped, one per line (a script)."""
    return subprocess.run(
        [*RELMERGE, "review", str(out), *args],
        input="".join(f"{key}\n" for key in keys),
        capture_output=True,
        text=True,
        timeout=120,
    )


def mapping(out: Path) -> dict[str, str]:
    value: dict[str, str] = orjson.loads((out / "relation_id_mapping.json").read_bytes())
    return value


def merged(out: Path, question: dict[str, Any]) -> bool:
    """Whether the last run in OUT merged the relations of ``question``."""
    return len({mapping(out)[m] for m in question["member_ids"]}) == 1


def test_ctrl_c_saves_the_answers_and_says_how_to_continue(out: Path) -> None:
    first = ReviewQueue(out).pending()[0]
    child = spawn("review", str(out))
    keys_shown(child)
    child.send("m")
    child.expect("→ merge")
    keys_shown(child)
    child.sendcontrol("c")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    tail = child.before.strip().splitlines()
    assert tail == [
        f"interrupted — 1 answer saved in {out / ANSWERS_FILE}, "
        f"{len(ReviewQueue(out).pending())} pending; continue: relmerge review {out}; "
        f"apply: relmerge review {out} --apply"
    ]
    assert "Aborted" not in child.before
    assert ReviewQueue(out).answers == {first["id"]: "merge"}


def test_ctrl_c_at_the_apply_prompt_applies_nothing(out: Path) -> None:
    before = mapping(out)
    child = spawn("review", str(out))
    keys_shown(child)
    child.send("m")
    keys_shown(child)
    child.send("q")
    child.expect(r"Apply the 1 answer now\? \[Y/n\] ")
    child.sendcontrol("c")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    assert "interrupted — 1 answer saved" in child.before
    assert mapping(out) == before


def test_the_review_ends_by_applying_the_answers_in_one_key_press(out: Path) -> None:
    first = ReviewQueue(out).pending()[0]
    assert not merged(out, first)
    command = recorded_command(out)
    assert command is not None and command.argv[:1] == ["run"]
    child = spawn("review", str(out))
    keys_shown(child)
    child.send("m")
    keys_shown(child)
    child.send("q")
    child.expect("To apply the 1 new answer, run the command that made")
    child.expect_exact(command.shell())  # ready to paste
    child.expect(r"Apply the 1 answer now\? \[Y/n\] ")
    child.send("\r")  # Enter: yes
    child.expect("applying: ")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert merged(out, first)
    assert '"tier":"remembered"' in (out / "decisions.jsonl").read_text()
    # Applied: a second review offers nothing more to apply.
    again = review(out, keys="q")
    assert "To apply" not in again.stdout and again.returncode == 0


def test_apply_without_a_terminal_runs_the_recorded_command(out: Path) -> None:
    first = ReviewQueue(out).pending()[0]
    answered = review(out, keys="mq")
    assert answered.returncode == 0, answered.stderr
    assert f"(or: relmerge review {out} --apply)" in answered.stdout
    assert "[Y/n]" not in answered.stdout  # no prompt without a terminal
    applied = review(out, "--apply")
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.startswith("applying: relmerge run ")
    assert merged(out, first)


def test_a_remembered_answer_can_be_revised(out: Path) -> None:
    first = ReviewQueue(out).pending()[0]
    assert review(out, keys="mq").returncode == 0
    assert review(out, "--apply").returncode == 0
    assert merged(out, first)
    assert first["id"] not in [q["id"] for q in ReviewQueue(out).questions]  # not asked

    revised = review(out, "--revise", keys="kq")  # answered questions come first
    assert revised.returncode == 0, revised.stderr
    assert "current answer: merge" in revised.stdout and first["id"] in revised.stdout
    assert ReviewQueue(out).answers[first["id"]] == "keep_both"
    memory = AnswerMemory(out / MEMORY_FILE)
    decided = [k for k in memory.remembered_keys() if memory.question_of(k) == first["id"]]
    assert decided and {memory.get(k) for k in decided} == {"keep_both"}  # latest wins
    assert "Apply the" not in revised.stdout and "--apply" in revised.stdout

    assert review(out, "--apply").returncode == 0
    assert not merged(out, first)
    # Still a remembered answer: the question is not asked again.
    assert first["id"] not in [q["id"] for q in ReviewQueue(out).pending()]


def test_deleting_answers_jsonl_forgets_the_answers(out: Path) -> None:
    first = ReviewQueue(out).pending()[0]
    assert review(out, keys="mq").returncode == 0
    run_sample(out)
    assert merged(out, first)
    (out / ANSWERS_FILE).unlink()
    run_sample(out)  # the user's re-run, as typed
    assert not merged(out, first)
    assert first["id"] in [q["id"] for q in ReviewQueue(out).pending()]  # asked again
    assert len(AnswerMemory(out / MEMORY_FILE)) == 0


def test_forget_one_answer_or_all(out: Path) -> None:
    first, second = ReviewQueue(out).pending()[:2]
    assert review(out, keys="mkq").returncode == 0
    unknown = review(out, "--forget", "clarify_0000")
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines() == [
        f"error: no answer to 'clarify_0000' in {out}: `relmerge review {out} --revise` "
        "shows the answered questions' ids"
    ]
    forgot = review(out, "--forget", first["id"], "--apply")
    assert forgot.returncode == 0, forgot.stderr
    assert forgot.stdout.startswith("forgot 1 answer: the next run asks again")
    assert not merged(out, first)
    assert first["id"] in [q["id"] for q in ReviewQueue(out).pending()]
    assert second["id"] not in [q["id"] for q in ReviewQueue(out).questions]  # remembered

    everything = review(out, "--forget-all")
    assert everything.returncode == 0
    assert "forgot 1 answer and 1 remembered pair" in everything.stdout
    assert f"(or: relmerge review {out} --apply)" in everything.stdout
    assert len(AnswerMemory(out / MEMORY_FILE)) == 0
    run_sample(out)
    assert second["id"] in [q["id"] for q in ReviewQueue(out).pending()]


def test_nothing_left_says_where_the_answers_come_from(out: Path) -> None:
    count = len(ReviewQueue(out).pending())
    assert review(out, keys="k" * count).returncode == 0
    assert review(out, "--apply").returncode == 0
    result = review(out)
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert f"nothing to review in {out}: the last run left no question without an answer" in (text)
    assert f"{count} answers given in {out} (answers.jsonl) decide their pairs" in text
    assert f"relmerge review {out} --revise" in text and "--forget-all" in text
    assert "To apply" not in text  # they are applied


def test_an_out_without_a_recorded_command_says_what_to_run(out: Path) -> None:
    marker = out / ".relmerge" / "run.json"
    marker.write_bytes(
        orjson.dumps({"fingerprint": orjson.loads(marker.read_bytes())["fingerprint"]})
    )
    answered = review(out, keys="mq")
    assert f"run `relmerge run INPUT --output {out} …` again" in " ".join(answered.stdout.split())
    applied = review(out, "--apply")
    assert applied.returncode == 2
    assert "does not record the command that made it" in applied.stderr


def test_storage_option_values_are_never_recorded(tmp_path: Path) -> None:
    from tests.review.test_review import EXAMPLE

    out = tmp_path / "out"
    subprocess.run(
        [
            *RELMERGE,
            *("run", str(EXAMPLE / "relations.jsonl"), "--output", str(out)),
            *("--embedding", "hash", "-q", "--storage-option", "secret=s3cr3t-value"),
            "--storage-option=token=t0ken-value",
        ],
        check=True,
    )
    recorded = (out / ".relmerge" / "run.json").read_text()
    assert "s3cr3t-value" not in recorded and "t0ken-value" not in recorded
    command = recorded_command(out)
    assert command is not None and command.hidden
    assert "secret=<hidden>" in command.argv and "--storage-option=token=<hidden>" in command.argv
    applied = review(out, "--apply")
    assert applied.returncode == 2 and "hides secret values" in applied.stderr
    assert "s3cr3t-value" not in applied.stderr


@pytest.mark.skipif(
    not Path(CHROMIUM).exists() and not os.environ.get("CI"),
    reason="Debian's chromium is not installed (scripts/test.sh installs it)",
)
def test_the_web_review_revises_and_ends_with_the_command_to_apply(out: Path) -> None:
    from playwright.sync_api import sync_playwright

    first = ReviewQueue(out).pending()[0]
    assert review(out, keys="mq").returncode == 0
    queue = ReviewQueue(out)
    command = recorded_command(out)
    assert command is not None
    with ReviewServer(queue, revise=True) as server, sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        page = browser.new_page()
        page.goto(server.url)
        page.wait_for_selector("#current")
        assert page.locator("#current").get_attribute("data-question-id") == first["id"]
        assert page.locator("#answer-now").inner_text() == "current answer: merge"
        page.keyboard.press("k")
        page.wait_for_selector("#status:has-text('saved: keep_both')")
        for _ in queue.to_review(revise=True)[1:]:
            page.keyboard.press("s")
        page.wait_for_selector("#done")
        assert page.locator("#apply-command").inner_text() == command.shell()
        assert f"relmerge review {out} --apply" in page.locator("#apply").inner_text()
        browser.close()
    assert ReviewQueue(out).answers == {first["id"]: "keep_both"}


def test_stopping_the_web_review_offers_to_apply_its_answers(out: Path) -> None:
    first = ReviewQueue(out).pending()[0]
    child = spawn("review", str(out), "--web", "--port", "0")
    child.expect(r"review page: http://127\.0\.0\.1:(\d+)/")
    host = f"127.0.0.1:{child.match.group(1)}"
    connection = http.client.HTTPConnection(host, timeout=10)
    connection.request("GET", "/", headers={"Host": host})
    token = re.search(
        r'name="relmerge-token" content="([^"]+)"', connection.getresponse().read().decode()
    )
    assert token is not None
    body = orjson.dumps({"id": first["id"], "answer": "merge"})
    headers = {"Host": host, TOKEN_HEADER: token.group(1), "Content-Type": "application/json"}
    connection.request("POST", "/api/answer", body=body, headers=headers)
    assert connection.getresponse().status == 200
    connection.close()
    child.sendcontrol("c")  # the end of a browser review
    child.expect("1 answered")
    child.expect(r"Apply the 1 answer now\? \[Y/n\] ")
    child.send("n")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert ReviewQueue(out).answers == {first["id"]: "merge"}
