"""The report as a reader sees it: real dev-set runs rendered in Debian's headless chromium.

Three runs: rules only (``--llm none``), the gold judge on the loopback server (LLM
tiers), and the rules-only run again after a person answered some of its questions
(remembered answers). In each rendered page: no legend box meets a bar of the Decisions
chart, the cosine axis is not stretched to -1 by the band that is off, and no code the
kernel writes is a visible label. Screenshots go to ``$RELMERGE_REPORT_SHOTS`` when set
(to look at), else to the test's temporary folder.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from relmerge.cli import main
from relmerge.report.words import KINDS
from tests.support.browser import CHROMIUM, launch_chromium
from tests.support.dev_cli import DEV, dev_rules_args, dev_run_args

pytestmark = [
    pytest.mark.skipif(not DEV.is_dir(), reason="shared dev set not present"),
    pytest.mark.skipif(
        not Path(CHROMIUM).exists() and not os.environ.get("CI"),
        reason="Debian's chromium is not installed (scripts/test.sh installs it)",
    ),
]
# The codes of the kernel's vocabulary (tiers, stages, verdicts, issues, guards, scores),
# not the settings' names, which a reader types into a config and sees in small print.
CODES = {
    code for kind in ("tier", "stage", "verdict", "issue", "guard", "score") for code in KINDS[kind]
}
UNDERSCORED = re.compile(r"\b(?:" + "|".join(sorted(c for c in CODES if "_" in c)) + r")\b")
# What the page said before it had words: "merged by remembered ×2", "(tier band)".
RAW_PHRASE = re.compile(
    r"\b(?:merged by|tier)\s+(?:"
    + "|".join(sorted(CODES, key=len, reverse=True))
    + r")\s*(?:×|\)|,|$)",
    re.MULTILINE,
)


def _cli(*args: str) -> None:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.stdout + result.stderr


def _rules_args(out: Path) -> list[str]:
    return [*dev_rules_args(out), "--entities", str(DEV / "entities.jsonl")]


@pytest.fixture(scope="module")
def rules_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rules") / "out"
    _cli(*_rules_args(out))
    return out


@pytest.fixture(scope="module")
def llm_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.support.gold_judge import dev_gold_judge, gold_task_handler
    from tests.support.llm_server import LLMServer

    out = tmp_path_factory.mktemp("llm") / "out"
    with LLMServer(handler=gold_task_handler(dev_gold_judge(DEV))) as server:
        _cli(*dev_run_args(out, server.base_url, 4))
    return out


@pytest.fixture(scope="module")
def answered_out(tmp_path_factory: pytest.TempPathFactory, rules_out: Path) -> Path:
    """The rules-only run, re-run after a person answered 30 of its questions."""
    out = tmp_path_factory.mktemp("answered") / "out"
    shutil.copytree(rules_out, out)
    questions = (out / "clarifications.jsonl").read_bytes().splitlines()[:30]
    answers = [
        orjson.dumps({"id": orjson.loads(line)["id"], "answer": ("keep_both", "merge")[i % 2]})
        for i, line in enumerate(questions)
    ]
    (out / "answers.jsonl").write_bytes(b"\n".join(answers) + b"\n")
    _cli(*_rules_args(out))
    return out


def _tiers(out: Path) -> set[str]:
    return {
        orjson.loads(line)["tier"] for line in (out / "decisions.jsonl").read_bytes().splitlines()
    }


_VISIBLE_TEXT = """() => {
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode, parent = node.parentElement;
    if (!parent || !node.textContent.trim()) continue;
    // Small-print codes, ids and the relations' own text are meant as they are.
    if (parent.closest('.code, .id, .rel, svg, style')) continue;
    if (!parent.getClientRects().length) continue;
    out.push(node.textContent);
  }
  return out;
}"""

_BOXES = """(selector) => {
  const svg = document.querySelector(selector);
  const box = (el) => { const r = el.getBoundingClientRect();
    return [r.left, r.top, r.right, r.bottom]; };
  return {
    bars: [...svg.querySelectorAll('g.bar')].map(box),
    legends: [...svg.querySelectorAll('g.legend')].map(box),
  };
}"""

_AXES = """(id) => {
  const axes = document.getElementById(id);
  return {
    xmin: Number(axes.dataset.xmin),
    ticks: [...axes.querySelectorAll('g.text')].map((g) => g.dataset.text),
  };
}"""

# The labels of the charts that show the run's codes (the LLM chart's are fixed words).
_LABELS = """() => [...document.querySelectorAll('section:not(#llm) svg.plot g.text')]
  .filter((g) => g.getBoundingClientRect().width > 0).map((g) => g.dataset.text)"""


def _meet(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _shots_dir(tmp_path: Path) -> Path:
    target = Path(os.environ.get("RELMERGE_REPORT_SHOTS") or tmp_path)
    target.mkdir(parents=True, exist_ok=True)
    return target


@pytest.mark.parametrize(
    ("run", "tier"), [("rules_out", "policy"), ("llm_out", "llm"), ("answered_out", "remembered")]
)
def test_the_report_reads_plainly_in_a_real_browser(
    run: str, tier: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    out: Path = request.getfixturevalue(run)
    assert tier in _tiers(out)  # the run shows the tier this case is about
    config = orjson.loads((out / "deduplicate_relations_result.json").read_bytes())["config"]
    assert config["auto_keep_cosine"] == -1.0  # the cosine keep-apart band is off
    _cli("report", str(out), "--input", str(DEV / "relations.jsonl"))
    name = run.removesuffix("_out")
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto((out / "report.html").as_uri())
        page.wait_for_load_state("load")
        boxes: dict[str, Any] = page.evaluate(_BOXES, "section#decisions svg.plot")
        cosine: dict[str, Any] = page.evaluate(_AXES, "scores-axes-cosine")
        visible: list[str] = page.evaluate(_VISIBLE_TEXT)
        labels: list[str] = page.evaluate(_LABELS)
        shots = _shots_dir(tmp_path)
        page.screenshot(path=str(shots / f"report-{name}.png"), full_page=True)
        page.locator("section#decisions").screenshot(path=str(shots / f"decisions-{name}.png"))
        page.locator("section#scores").screenshot(path=str(shots / f"scores-{name}.png"))
        browser.close()

    # The Decisions legend sits beside the bars, never on one.
    assert boxes["bars"] and len(boxes["legends"]) == 1
    assert not [bar for bar in boxes["bars"] if _meet(bar, boxes["legends"][0])]
    # The cosine axis spans the data and the bands that are on, not the sentinel -1.
    assert cosine["xmin"] > -0.9
    assert not [t for t in cosine["ticks"] if re.fullmatch(r"[−-]1(\.0+)?", t)]
    assert "cosine keep-apart band: off" in labels
    # Plain words wherever a reader looks: page text and the charts' labels.
    text = "\n".join(visible)
    assert not UNDERSCORED.findall(text) and not RAW_PHRASE.findall(text)
    assert len(labels) > 20
    for label in labels:
        assert label not in CODES and not UNDERSCORED.search(label), label
        assert not re.match(r"(?:exact|semantic|judge|all) / ", label), label
    assert (shots / f"report-{name}.png").read_bytes().startswith(b"\x89PNG")
