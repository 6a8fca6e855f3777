"""``relmerge import`` and ``relmerge export`` show their progress as ``run`` does (bars on a
terminal, a line per phase in a log, nothing with --quiet), and ``import`` refuses to
replace another import without --overwrite, as ``run`` and ``export`` refuse.

Driven as a new user ran them: subprocesses and a pseudo-terminal, on folders GraphRAG
and LightRAG wrote themselves.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pexpect
import pytest

from tests.adapters.upstream import UPSTREAM, needs_upstream

RELMERGE = [sys.executable, "-m", "relmerge"]
VERBS = UPSTREAM / "graphrag" / "v3-tests-verbs"
DULCE = UPSTREAM / "graphrag" / "v3-operation-dulce"
HOME_LAB = UPSTREAM / "lightrag" / "home-lab-agentic-ai"
_AMOUNT = r"[\d,.]+(?: [kMG]?B)?"  # 1,507 or 244.8 kB
_PHASE = re.compile(
    rf"^(?P<label>[a-z ]+): (?P<done>{_AMOUNT})/(?P<total>{_AMOUNT})( (?P<unit>[a-z]+))? "
    r"in [\d.]+ s$"
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")

pytestmark = needs_upstream


def relmerge(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RELMERGE, *args], capture_output=True, text=True, check=False)


def _phases(stderr: str) -> list[tuple[str, str, str]]:
    """(label, done/total, unit) of each line; every line must be a phase's line, and
    every phase must end at its total."""
    phases = []
    for line in stderr.strip().splitlines():
        match = _PHASE.match(line)
        assert match is not None, line
        assert match["done"] == match["total"], line
        phases.append((match["label"], match["total"], match["unit"] or "bytes"))
    return phases


@pytest.fixture(scope="module")
def verbs_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The GraphRAG folder imported and run (rules only) into work/run."""
    work = tmp_path_factory.mktemp("verbs") / "work"
    assert relmerge("import", "graphrag", str(VERBS), "--output", str(work), "-q").returncode == 0
    run = relmerge(
        "run", str(work / "relations.jsonl"), "--output", str(work / "run"),
        "--llm", "none", "--embedding", "hash", "-q",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return work


def test_a_graphrag_import_logs_its_phases(tmp_path: Path) -> None:
    done = relmerge("import", "graphrag", str(VERBS), "--output", str(tmp_path / "work"))
    assert done.returncode == 0, done.stderr
    assert _phases(done.stderr) == [
        ("reading tables", "3", "tables"),  # relationships, entities, text units
        ("converting rows", "978", "rows"),
        ("writing", "1,507", "records"),  # 978 relations and 529 entities
    ]
    assert done.stdout.startswith("Imported 978 relations from 978 relationships")


def test_a_graphrag_export_logs_its_phases(verbs_run: Path, tmp_path: Path) -> None:
    target = tmp_path / "dedup"
    done = relmerge(
        "export", "graphrag", str(verbs_run / "run"), "--original", str(VERBS), "--to", str(target)
    )
    assert done.returncode == 0, done.stderr
    written = sum(1 for path in target.rglob("*") if path.is_file())
    assert _phases(done.stderr) == [
        ("reading tables", "3", "tables"),
        ("converting rows", "978", "rows"),  # the original, to find each record's row
        ("reading the run", "978", "relations"),
        ("rewriting rows", "978", "rows"),
        ("writing", str(written), "files"),  # every file of the copy
    ]


def test_a_lightrag_import_logs_its_phases(tmp_path: Path) -> None:
    done = relmerge("import", "lightrag", str(HOME_LAB), "--output", str(tmp_path / "work"))
    assert done.returncode == 0, done.stderr
    summary = orjson.loads((tmp_path / "work" / "import.json").read_bytes())
    size = (HOME_LAB / "graph_chunk_entity_relation.graphml").stat().st_size
    assert _phases(done.stderr) == [
        ("reading the graph", f"{size / 1e3:.1f} kB", "bytes"),
        ("converting edges", str(summary["edges"]), "edges"),
        ("writing", f"{summary['relations'] + summary['entities']:,}", "records"),
    ]


def test_quiet_import_and_export_print_nothing(verbs_run: Path, tmp_path: Path) -> None:
    imported = relmerge("import", "graphrag", str(VERBS), "--output", str(tmp_path / "w"), "-q")
    exported = relmerge(
        "export", "graphrag", str(verbs_run / "run"), "--original", str(VERBS),
        "--to", str(tmp_path / "dedup"), "--quiet",
    )  # fmt: skip
    for done in (imported, exported):
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert (tmp_path / "w" / "relations.jsonl").is_file() and (tmp_path / "dedup").is_dir()


@pytest.mark.parametrize("command", ["import", "export"])
def test_on_a_terminal_each_phase_gets_a_bar(command: str, verbs_run: Path, tmp_path: Path) -> None:
    if command == "import":
        args = ["import", "graphrag", str(VERBS), "--output", str(tmp_path / "work")]
        labels = {"reading tables", "converting rows", "writing"}
    else:
        args = ["export", "graphrag", str(verbs_run / "run"), "--original", str(VERBS)]
        args += ["--to", str(tmp_path / "dedup")]
        labels = {"reading tables", "reading the run", "rewriting rows", "writing"}
    child = pexpect.spawn(
        RELMERGE[0],
        [*RELMERGE[1:], *args],
        env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "150"},
        dimensions=(40, 150),
        encoding="utf-8",
        timeout=300,
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    screen = [line.strip() for line in re.split(r"[\r\n]+", _ANSI.sub("", child.before or ""))]
    bars = [line for line in screen if re.search(r"\b(eta|took) \d:\d\d:\d\d", line)]
    assert {label for label in labels for line in bars if line.startswith(label)} == labels
    for line in bars:
        assert re.search(r"[\d.,]+/[\d.,]+ [a-z]+", line), line  # done/total unit
    assert any(line.startswith(("Imported", "Wrote")) for line in screen)


def test_import_refuses_to_replace_another_import_without_overwrite(tmp_path: Path) -> None:
    work = tmp_path / "work"
    assert relmerge("import", "graphrag", str(VERBS), "--output", str(work)).returncode == 0
    before = {path.name: path.read_bytes() for path in work.iterdir()}

    again = relmerge("import", "graphrag", str(VERBS), "--output", str(work))
    assert again.returncode == 0, again.stderr  # the same import again changes nothing

    other = relmerge("import", "graphrag", str(DULCE), "--output", str(work))
    assert other.returncode == 2
    error = other.stderr.strip().splitlines()[-1]
    assert error == (
        f"error: --output {work} holds an import of another graph ({VERBS}); "
        "choose another --output or pass --overwrite"
    )
    assert {path.name: path.read_bytes() for path in work.iterdir()} == before

    replaced = relmerge("import", "graphrag", str(DULCE), "--output", str(work), "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    assert orjson.loads((work / "import.json").read_bytes())["source"] == str(DULCE)
    assert replaced.stdout.startswith("Imported 107 relations")


def test_import_refuses_to_replace_a_relations_file_it_did_not_write(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "relations.jsonl").write_text('{"mine": true}\n', encoding="utf-8")
    done = relmerge("import", "lightrag", str(HOME_LAB), "--output", str(work), "-q")
    assert done.returncode == 2
    assert "holds a relations.jsonl this import would replace" in done.stderr
    assert "--overwrite" in done.stderr
    assert (work / "relations.jsonl").read_text(encoding="utf-8") == '{"mine": true}\n'
