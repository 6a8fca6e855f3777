"""``relmerge report``: real runs of the CLI into OUT, the page's sections, escaping of the
untrusted relation text, errors, and the page in a real headless browser."""

from __future__ import annotations

import html
import os
import re
import shutil
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from relmerge.cli import main
from relmerge.report.words import plain
from tests.support.browser import CHROMIUM, launch_chromium
from tests.support.dev_cli import DEV

needs_dev = pytest.mark.skipif(not DEV.is_dir(), reason="shared dev set not present")
HOSTILE = "<script>alert(1)</script>"
HOSTILE_NAME = "<img src=x onerror=alert(2)>"
SECTIONS = (
    "summary",
    "decisions",
    "scores",
    "clusters",
    "llm",
    "issues",
    "seconds",
    "groups",
    "clarifications",
    "rejected",
    "settings",
)
EXTERNAL = re.compile(r"""\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def _hostile_record(relation_id: str, chunk: str) -> dict[str, object]:
    return {
        "relation_id": relation_id,
        "chunk_id": chunk,
        "document_id": "doc_hostile",
        "source_entity_id": "ent_hostile_a",
        "target_entity_id": "ent_hostile_b",
        "source_entity_name": HOSTILE_NAME,
        "target_entity_name": "Target & Co",
        "type": "mention",
        "name": "mentions",
        "description": f"A hostile description {HOSTILE} that must stay text.",
        "attributes": {"note": HOSTILE},
        "source_chunk_ids": [chunk],
    }


@pytest.fixture(scope="module")
def input_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dev set plus two identical hostile records (an exact-stage merge, no LLM), one
    record with a missing field and one broken line (both rejected)."""
    path = tmp_path_factory.mktemp("input") / "relations.jsonl"
    extra = [
        _hostile_record("rel_hostile_1", "chunk_hostile_1"),
        _hostile_record("rel_hostile_2", "chunk_hostile_2"),
        {k: v for k, v in _hostile_record("rel_hostile_3", "c3").items() if k != "name"},
    ]
    lines = (DEV / "relations.jsonl").read_bytes().rstrip(b"\n") + b"\n"
    lines += b"".join(orjson.dumps(item) + b"\n" for item in extra) + b'{"relation_id": \n'
    path.write_bytes(lines)
    return path


def _run_args(input_path: Path, out: Path) -> list[str]:
    return [
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
        "-q",
    ]


@pytest.fixture(scope="module")
def llm_out(tmp_path_factory: pytest.TempPathFactory, input_path: Path) -> Path:
    """A run with the gold judge on the loopback server: LLM tiers, requests, tokens."""
    from tests.support.gold_judge import dev_gold_judge, gold_task_handler
    from tests.support.llm_server import LLMServer

    out = tmp_path_factory.mktemp("llm") / "out"
    with LLMServer(handler=gold_task_handler(dev_gold_judge(DEV))) as server:
        args = [*_run_args(input_path, out), "--llm-base-url", server.base_url]
        code, stdout, stderr = _cli(*args, "--llm-model", "gold")
    assert code == 0, stdout + stderr
    return out


@pytest.fixture(scope="module")
def rules_out(tmp_path_factory: pytest.TempPathFactory, input_path: Path) -> Path:
    """A run without a language model: the in-between band becomes clarifications."""
    out = tmp_path_factory.mktemp("rules") / "out"
    code, stdout, stderr = _cli(*_run_args(input_path, out))
    assert code == 0, stdout + stderr
    return out


def _report(out: Path, *args: str) -> str:
    code, stdout, stderr = _cli("report", str(out), *args)
    assert code == 0, stdout + stderr
    path = Path(stdout.strip())
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def llm_page(llm_out: Path, input_path: Path) -> str:
    return _report(llm_out, "--input", str(input_path))


def _result(out: Path) -> dict[str, object]:
    result: dict[str, object] = orjson.loads(
        (out / "deduplicate_relations_result.json").read_bytes()
    )
    return result


@needs_dev
def test_every_section_is_there_with_its_plot(llm_out: Path, llm_page: str) -> None:
    assert (llm_out / "report.html").is_file()
    for section in SECTIONS:
        assert f'id="{section}"' in llm_page, section
    for plot in ("decisions", "seconds", "scores", "clusters", "llm", "issues"):
        assert re.search(rf'<section id="{plot}"[^>]*><h2>[^<]*</h2><svg class="plot"', llm_page)
    result = _result(llm_out)
    assert f"<dd>{result['llm_requests']:,}" in llm_page
    assert f"<dd>{result['output_relation_count']:,}" in llm_page
    assert "auto_merge_fuzzy" in llm_page and "similarity_threshold" in llm_page
    assert "No pending clarifications" in llm_page  # the gold judge is never unsure


@needs_dev
def test_groups_show_their_members_from_input(llm_out: Path, llm_page: str) -> None:
    mapping = orjson.loads((llm_out / "relation_id_mapping.json").read_bytes())
    sizes: dict[str, int] = {}
    for output_id in mapping.values():
        sizes[output_id] = sizes.get(output_id, 0) + 1
    largest = max(sizes, key=lambda o: sizes[o])
    assert f'<span class="id">{largest}</span><span class="badge">{sizes[largest]} members' in (
        llm_page
    )
    assert llm_page.count('<article class="group">') == 20  # the default sample
    llm = plain("tier", "llm")
    assert re.search(
        rf'merged by <span class="term" title="[^"]*\(tier: llm\)">{llm}</span>', llm_page
    )
    assert "not in INPUT" not in llm_page
    first_member = next(i for i, o in mapping.items() if o == largest)
    record = next(
        orjson.loads(line)
        for line in (DEV / "relations.jsonl").read_bytes().splitlines()
        if orjson.loads(line)["relation_id"] == first_member
    )
    assert html.escape(record["description"][:200]) in llm_page


@needs_dev
def test_relation_text_is_escaped_never_markup(rules_out: Path, input_path: Path) -> None:
    page = _report(rules_out, "--input", str(input_path), "--sample", "1000")
    assert "rel_hostile_1" in page  # the hostile group is shown...
    assert HOSTILE not in page and HOSTILE_NAME not in page  # ...as text
    assert html.escape(HOSTILE) in page and html.escape(HOSTILE_NAME) in page
    assert "<script" not in page.lower()
    assert "Target &amp; Co" in page


@needs_dev
def test_page_is_self_contained_and_small(llm_page: str) -> None:
    assert not EXTERNAL.search(llm_page)
    assert "<link" not in llm_page and "@import" not in llm_page and "url(http" not in llm_page
    assert len(llm_page.encode()) < 3_000_000


@needs_dev
def test_rules_only_run_shows_clarifications_and_rejected(rules_out: Path) -> None:
    page = _report(rules_out, "--sample", "5")
    pending = _result(rules_out)["clarification_count"]
    assert isinstance(pending, int) and pending > 5
    assert f"{pending:,} pending, 0 answered; showing 5." in page
    assert page.count('<span class="id">clarify_') == 5
    assert page.count('<article class="group">') == 5
    assert "This run had no language model" in page
    assert "2 input records were set aside" in page
    assert "missing field &#x27;name&#x27;" in page
    # Without INPUT the members are listed by id, and the page says how to see their text.
    assert "Pass the run&#x27;s INPUT" in page or "Pass the run's INPUT" in page


@needs_dev
def test_answered_questions_are_not_pending(rules_out: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(rules_out, out)
    first = orjson.loads((out / "clarifications.jsonl").read_bytes().splitlines()[0])
    (out / "answers.jsonl").write_bytes(orjson.dumps({"id": first["id"], "answer": "merge"}))
    page = _report(out)
    pending = _result(out)["clarification_count"]
    assert isinstance(pending, int)
    assert f"{pending - 1:,} pending, 1 answered" in page
    assert first["id"] not in page


@needs_dev
def test_output_option_writes_elsewhere_and_prints_the_path(
    rules_out: Path, tmp_path: Path
) -> None:
    target = tmp_path / "page.html"
    code, stdout, _ = _cli("report", str(rules_out), "--output", str(target))
    assert code == 0 and stdout.strip() == str(target)
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    code, _, stderr = _cli("report", str(rules_out), "--output", str(tmp_path / "no" / "x.html"))
    assert code == 2 and "is not a directory" in stderr


def test_no_complete_run_is_a_clear_error(tmp_path: Path) -> None:
    for out in (tmp_path, tmp_path / "missing"):
        code, _, stderr = _cli("report", str(out))
        assert code == 2
        assert stderr.startswith("error: no complete run in") and stderr.count("\n") == 1
    (tmp_path / "deduplicate_relations_result.json").write_text("[1, 2")
    code, _, stderr = _cli("report", str(tmp_path))
    assert code == 2 and "not a JSON object" in stderr


@needs_dev
def test_missing_or_damaged_files_are_noted_not_fatal(rules_out: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(rules_out, out)
    for name in ("clarifications.jsonl", "rejected.jsonl", "relation_id_mapping.json"):
        (out / name).unlink()
    with (out / "decisions.jsonl").open("ab") as handle:
        handle.write(b'{"member_ids": ["torn')
    page = _report(out)
    notes = page[page.index('id="notes"') : page.index("</div>", page.index('id="notes"'))]
    for expected in (
        "decisions.jsonl: 1 unreadable line(s) skipped.",
        "clarifications.jsonl is missing",
        "rejected.jsonl is missing",
        "relation_id_mapping.json is missing",
    ):
        assert expected in notes
    assert "No merged groups in this run." in page
    assert "2 input records were set aside" in page  # the count from the result
    (out / "decisions.jsonl").unlink()
    page = _report(out)
    assert "decisions.jsonl is missing" in page
    assert re.search(r'<section id="decisions"><h2>[^<]*</h2><svg', page)  # by tier, from result


def test_groups_sample_is_largest_first_then_random_and_stable() -> None:
    from relmerge.report.data import choose_groups

    members = {f"o{i}": [f"r{i}_{j}" for j in range(1 + i % 7)] for i in range(60)}
    members["big"] = [f"b{j}" for j in range(30)]
    chosen = choose_groups(members, 8)
    assert chosen == choose_groups(members, 8)
    assert chosen[0] == "big" and len(chosen) == 8
    assert all(len(members[o]) > 1 for o in chosen)
    sizes = [len(members[o]) for o in chosen]
    assert sizes == sorted(sizes, reverse=True)
    assert choose_groups(members, 0) == []


def test_plot_labels_from_data_cannot_inject_markup_or_mathtext() -> None:
    from relmerge.report.model import IssueCount
    from relmerge.report.plots import issues_chart
    from relmerge.report.svg import label

    assert label("a$b</svg>") == "a?b?/svg?"
    chart = issues_chart([IssueCount("</svg><script>x</script>$\\alpha$", "warning", 3, "m")])
    assert chart is not None
    svg = chart.svg()
    assert svg.count("<svg") == 1 and "<script" not in svg
    assert 'id="issues-' in svg and "<!--" not in svg and "http" not in svg.split(">", 1)[1]


@needs_dev
@pytest.mark.skipif(
    not Path(CHROMIUM).exists() and not os.environ.get("CI"),
    reason="Debian's chromium is not installed (scripts/test.sh installs it)",
)
def test_page_renders_in_a_real_browser(llm_out: Path, llm_page: str, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    page_file = llm_out / "report.html"
    errors: list[str] = []
    requests: list[str] = []
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("request", lambda request: requests.append(request.url))
        page.goto(page_file.as_uri())
        page.wait_for_load_state("load")
        plots = page.locator("svg.plot")
        assert plots.count() == 6
        for index in range(plots.count()):
            box = plots.nth(index).bounding_box()
            assert box is not None and box["width"] > 100 and box["height"] > 50
        assert page.locator("article.group").count() == 20
        assert page.locator("h1").inner_text() == "relmerge report"
        shot = tmp_path / "report.png"
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    assert errors == []
    assert requests == [page_file.as_uri()]  # nothing fetched besides the page itself
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 10_000


@needs_dev
def test_the_llm_section_says_the_cost_per_task(llm_page: str) -> None:
    cost = llm_page.split('<h3 id="cost">Cost</h3>', 1)[1].split("</table>", 1)[0]
    assert "relation_cluster" in cost and "requests" in cost.lower()
    assert "Tokens as measured: usage." in llm_page
    assert "No prices given" in llm_page


@needs_dev
def test_the_llm_section_says_how_the_model_answered_its_canaries(
    llm_out: Path, llm_page: str
) -> None:
    canaries = _result(llm_out)["canaries"]
    assert isinstance(canaries, dict) and canaries["verdict"] == "trusted"
    line = llm_page.split('<p id="canary-agreement">', 1)[1].split("</p>", 1)[0]
    shown = f"<strong>{canaries['right']} of {canaries['answered']}</strong>"
    decided = canaries["decided_after"]
    assert shown in line and "distrusted" not in line
    assert (
        f"trusted by the sequential test (0.89 against 0.62) on its first "
        f"{decided['answered']} answers ({decided['right']} right)"
    ) in line
    assert "The rule: Wald&#x27;s sequential test" in line or "The rule: Wald's" in line


def _canary_line(llm_out: Path, tmp_path: Path, **canaries: object) -> str:
    """The report's canary line for a copy of ``llm_out`` whose result's canaries were
    changed by ``canaries``."""
    out = tmp_path / "out"
    shutil.copytree(llm_out, out)
    path = out / "deduplicate_relations_result.json"
    result = orjson.loads(path.read_bytes())
    result["canaries"].update(canaries)
    path.write_bytes(orjson.dumps(result))
    return _report(out).split('<p id="canary-agreement">', 1)[1].split("</p>", 1)[0]


@needs_dev
def test_a_distrusted_model_is_named_so_with_the_reason(llm_out: Path, tmp_path: Path) -> None:
    reason = "the model answered 2 of 8 certain questions right <b>"
    decided = {"answered": 8, "right": 2, "boundary": "stop"}
    line = _canary_line(
        llm_out,
        tmp_path,
        asked=12,
        answered=12,
        right=6,
        verdict="distrusted",
        decided_after=decided,
        distrusted=True,
        reason=reason,
    )
    assert "<strong>6 of 12</strong>" in line and "<strong>distrusted</strong>" in line
    assert "stopped by the sequential test (0.89 against 0.62) on its first 8 answers" in line
    assert html.escape(reason) in line and "<b>" not in line


@needs_dev
def test_a_run_too_small_to_judge_says_so(llm_out: Path, tmp_path: Path) -> None:
    line = _canary_line(
        llm_out, tmp_path, asked=5, answered=4, right=4, verdict="not_judged", decided_after=None
    )
    assert "<strong>4 of 4 (1 unanswered)</strong> certain questions right" in line
    assert "not enough canaries to judge the model (0.89 against 0.62)" in line


@needs_dev
def test_a_run_without_canaries_shows_none(rules_out: Path) -> None:
    assert "canary-agreement" not in _report(rules_out)
