"""A run that leaves pairs undecided says how many, why, and the two ways on; merges a
person's answers made are counted on their own line.

A new user imported a GraphRAG folder, ran ``relmerge run --llm none`` and exported: the
copy was identical (107 → 107 rows here) and nothing said that 5 pairs were waiting for
a judge. Driven as the user did: subprocesses, the commands the run prints run as
printed, a loopback LLM for "the same command with an LLM", and ``relmerge review``
answered through its stdin.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from relmerge.eval.gold_judge import GoldJudge
from tests.adapters.upstream import UPSTREAM, needs_upstream
from tests.factories import record
from tests.support.gold_judge import gold_task_handler
from tests.support.llm_server import LLMServer

RELMERGE = [sys.executable, "-m", "relmerge"]
DULCE = UPSTREAM / "graphrag" / "v3-operation-dulce"


def relmerge(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RELMERGE, *args], capture_output=True, text=True, check=False, input=stdin
    )


def _result(out: Path) -> dict[str, Any]:
    result: dict[str, Any] = orjson.loads((out / "deduplicate_relations_result.json").read_bytes())
    return result


def _table(stdout: str) -> dict[str, str]:
    """The summary table's rows: label -> value."""
    rows = {}
    for line in stdout.splitlines():
        cells = [cell.strip() for cell in line.strip("│┃ ").split("│")]
        if len(cells) == 2 and cells[0]:
            rows[cells[0]] = cells[1]
    return rows


def _ways(stdout: str) -> list[list[str]]:
    """The commands under "Two ways on:", as argument lists (the program name dropped)."""
    lines = stdout.splitlines()
    start = lines.index("Two ways on:")
    commands = [line.strip() for line in lines[start + 1 :] if line.startswith("  relmerge ")]
    return [shlex.split(command)[1:] for command in commands]


@needs_upstream
def test_a_graphrag_run_without_an_llm_says_what_is_left_and_how_to_decide_it(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    assert relmerge("import", "graphrag", str(DULCE), "--output", str(work), "-q").returncode == 0
    run = relmerge(
        "run", str(work / "relations.jsonl"), "--entities", str(work / "entities.jsonl"),
        "--output", str(work / "run"), "--llm", "none",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    result = _result(work / "run")
    pairs, blocks = result["llm_needed_pair_count"], result["llm_needed_block_count"]
    assert (pairs, blocks) == (5, 5)  # reversed rows of one entity pair, one pair a block
    assert result["output_relation_count"] == result["input_relation_count"] == 107
    text = run.stdout
    assert "5 pairs of relations in 5 blocks are left undecided" in text
    assert "no LLM was given (--llm none)" in text
    # why: GraphRAG rows point both ways, and their names ("related") prove nothing
    assert "- 5: point opposite ways between the same two entities" in text
    assert "for 5 of them the names prove nothing" in text
    review, with_llm = _ways(text)
    assert review == ["review", str(work / "run")]
    assert with_llm[-5:] == ["--llm-base-url", "URL", "--llm-model", "NAME", "--overwrite"]
    assert "--llm" not in with_llm and "none" not in with_llm

    # The second way, run as printed: an LLM decides every pair, nothing is left.
    with LLMServer(handler=gold_task_handler(GoldJudge({}))) as judge:
        asked = [judge.base_url if a == "URL" else "judge" if a == "NAME" else a for a in with_llm]
        again = relmerge(*asked)
    assert again.returncode == 0, again.stderr
    assert _result(work / "run")["llm_needed_pair_count"] == 0
    assert _result(work / "run")["llm_requests"] == 1  # the five pairs in one packed request
    assert "left undecided" not in again.stdout and "ways on" not in again.stdout


@needs_upstream
def test_the_review_way_answers_the_pairs_and_the_same_command_applies_them(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    assert relmerge("import", "graphrag", str(DULCE), "--output", str(work), "-q").returncode == 0
    command = [
        "run", str(work / "relations.jsonl"), "--output", str(work / "run"),
        "--llm", "none", "--embedding", "hash",
    ]  # fmt: skip
    first = relmerge(*command)
    assert first.returncode == 0, first.stderr
    review = _ways(first.stdout)[0]
    pending = _result(work / "run")["llm_needed_pair_count"]
    assert pending > 0
    answered = relmerge(*review, stdin="m\n" * pending)
    assert answered.returncode == 0, answered.stderr
    again = relmerge(*command)
    assert again.returncode == 0, again.stderr
    assert "left undecided" not in again.stdout
    result = _result(work / "run")
    assert result["human_merge_count"] == pending  # one merge per answered pair
    assert _table(again.stdout)["merged by a person's answers"] == str(pending)


def test_a_persons_merges_are_counted_apart_from_the_stages(tmp_path: Path) -> None:
    """Answers from ``relmerge review`` merge on the next run: within an exact key (c1, c2)
    and across keys (d1, d2). The table shows them on their own line, the result JSON in
    ``human_merge_count``; exact_merge_count and semantic_merge_count still count every
    merge by where it falls (within a key or across), as the step contract has them."""
    ada = {"source_entity_name": "Norrbeck Systems", "target_entity_name": "Ada Lind"}
    xy = {
        "source_entity_id": "e_x", "target_entity_id": "e_y", "source_entity_name": "X",
        "target_entity_name": "Y", "name": "related", "type": "related",
    }  # fmt: skip
    yx = {**xy, "source_entity_id": "e_y", "target_entity_id": "e_x"}
    yx.update(source_entity_name="Y", target_entity_name="X")
    records = [
        record("c1", description="Ada Lind has led Norrbeck as CEO since 2015.", **ada),
        record("c2", description="Ada Lind runs Norrbeck as its chief executive.", **ada),
        record("d1", description="X and Y work together on the harbour project.", **xy),
        record("d2", description="Y partners with X in building the new harbour.", **yx),
    ]
    source = tmp_path / "relations.jsonl"
    source.write_bytes(b"".join(orjson.dumps(item) + b"\n" for item in records))
    out = tmp_path / "out"
    command = ["run", str(source), "--output", str(out), "--llm", "none", "--embedding", "hash"]
    first = relmerge(*command)
    assert first.returncode == 0, first.stderr
    assert "2 pairs of relations in 2 blocks are left undecided" in first.stdout
    assert _table(first.stdout)["merged by a person's answers"] == "0"

    assert relmerge("review", str(out), stdin="m\nm\n").returncode == 0
    again = relmerge(*command)
    assert again.returncode == 0, again.stderr
    table = _table(again.stdout)
    assert table["merged by exact stage"] == "0"
    assert table["merged by semantic stage"] == "0"
    assert table["merged by a person's answers"] == "2"
    result = _result(out)
    assert result["output_relation_count"] == 2
    assert result["human_merge_count"] == 2 and result["human_exact_merge_count"] == 1
    assert (result["exact_merge_count"], result["semantic_merge_count"]) == (1, 1)
    tiers = [
        orjson.loads(line)["tier"] for line in (out / "decisions.jsonl").read_bytes().splitlines()
    ]
    assert tiers.count("remembered") == 2


@pytest.mark.parametrize(
    ("extra", "cause", "way"),
    [
        (["--max-llm-requests", "0"], "the LLM budget ran out", "--max-llm-requests N"),
        ([], None, None),
    ],
    ids=["budget-spent", "all-decided"],
)
def test_a_spent_budget_says_so_and_shows_the_command_with_a_budget(
    tmp_path: Path, extra: list[str], cause: str | None, way: str | None
) -> None:
    records = [
        record("c1", description="Ada Lind has led Norrbeck as CEO since 2015."),
        record("c2", description="Ada Lind runs Norrbeck as its chief executive."),
    ]
    source = tmp_path / "relations.jsonl"
    source.write_bytes(b"".join(orjson.dumps(item) + b"\n" for item in records))
    with LLMServer(handler=gold_task_handler(GoldJudge({}))) as judge:
        done = relmerge(
            "run", str(source), "--output", str(tmp_path / "out"), "--embedding", "hash",
            "--llm-base-url", judge.base_url, "--llm-model", "judge", *extra,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    if cause is None:
        assert "left undecided" not in done.stdout
        return
    assert cause in done.stdout
    review, with_budget = _ways(done.stdout)
    assert review[0] == "review"
    assert " ".join(with_budget).endswith(f"{way} --overwrite")
    assert with_budget.count("--max-llm-requests") == 1  # the spent one replaced
    assert re.search(r"--llm-base-url \S+ --llm-model judge", " ".join(with_budget))
