"""``relmerge demo``: the sample batch shipped in the package, run as ``relmerge run`` runs
it, from any working directory, then the way on (review, report, an LLM)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
from click.testing import CliRunner

from relmerge.cli import main
from relmerge.data import sample_dir
from relmerge.review.queue import ReviewQueue
from tests.support.dev_cli import run_outputs

RELMERGE = [sys.executable, "-m", "relmerge"]
SAMPLE = sample_dir()


def sample_ids() -> set[str]:
    lines = (SAMPLE / "relations.jsonl").read_bytes().splitlines()
    return {orjson.loads(line)["relation_id"] for line in lines if line.strip()}


def test_demo_runs_offline_from_any_folder_and_says_what_waits(tmp_path: Path) -> None:
    # No --output: the default folder is made in the working directory, not the checkout.
    done = subprocess.run(
        [*RELMERGE, "demo"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    out = tmp_path / "relmerge-demo"
    mapping = orjson.loads((out / "relation_id_mapping.json").read_bytes())
    assert set(mapping) == sample_ids()
    result = orjson.loads((out / "deduplicate_relations_result.json").read_bytes())
    assert result["llm_requests"] == 0
    assert result["embedding_model"] == "use-multilingual-v3"  # the default, not hash
    waiting = len(ReviewQueue(out).pending())
    assert waiting > 0, "the sample leaves pairs for a person"
    text = " ".join(done.stdout.split())
    assert f"{waiting} cases wait for a person" in text
    assert "relmerge review relmerge-demo" in text
    assert "relmerge run relmerge-demo/input/relations.jsonl \\" in text
    assert "Traceback" not in done.stderr


def demo(cwd: Path, *args: str, columns: int = 60) -> subprocess.CompletedProcess[str]:
    """``relmerge demo`` as a person runs it in a terminal ``columns`` wide."""
    env = {**os.environ, "COLUMNS": str(columns)}
    done = subprocess.run(
        [*RELMERGE, "demo", *args], cwd=cwd, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    return done


def closing(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The lines after the summary table: what is left, the outputs, the next steps."""
    lines = done.stdout.splitlines()
    return lines[max(i for i, line in enumerate(lines) if line.startswith("└")) + 1 :]


def test_the_demo_closes_with_each_next_step_once_short_and_wrapped(tmp_path: Path) -> None:
    text = closing(demo(tmp_path))
    assert all(len(line) <= 60 for line in text), text
    joined = "\n".join(text)
    assert joined.count("Next steps:") == 1 and "Two ways on" not in joined
    assert str(SAMPLE) not in joined and "site-packages" not in joined
    commands = [line.strip() for line in text if line.strip().startswith("relmerge ")]
    assert [c.split()[1] for c in commands] == ["report", "review", "run"], text
    assert "--llm-base-url" not in " ".join(commands[:2])  # the demo takes no LLM option
    # The LLM command runs as printed: its files are where it says.
    sample = tmp_path / "relmerge-demo" / "input"
    assert sorted(p.name for p in sample.iterdir()) == sorted(
        ["relations.jsonl", "entity_id_mapping.json", "entities.jsonl"]
    )
    assert (sample / "relations.jsonl").read_bytes() == (SAMPLE / "relations.jsonl").read_bytes()


def test_no_llm_hint_once_every_case_is_answered(tmp_path: Path) -> None:
    demo(tmp_path)
    queue = ReviewQueue(tmp_path / "relmerge-demo")
    for question in queue.pending():
        queue.answer(question["id"], "keep_both")
    text = "\n".join(closing(demo(tmp_path)))
    assert "No case waits for a person" in text
    assert "LLM" not in text.replace("without an LLM", "")  # the outputs list says it
    assert "relmerge report relmerge-demo" in text and "relmerge run" not in text


def test_demo_writes_what_run_writes_with_the_sample_and_defaults(tmp_path: Path) -> None:
    demo, run = tmp_path / "demo", tmp_path / "run"
    assert CliRunner().invoke(main, ["demo", "--output", str(demo)]).exit_code == 0
    ran = CliRunner().invoke(
        main,
        [
            "run",
            str(SAMPLE / "relations.jsonl"),
            "--entity-mapping",
            str(SAMPLE / "entity_id_mapping.json"),
            "--entities",
            str(SAMPLE / "entities.jsonl"),
            "--output",
            str(run),
        ],
    )
    assert ran.exit_code == 0, ran.output
    assert run_outputs(demo) == run_outputs(run)
    for name in ("decisions.jsonl", "clarifications.jsonl"):
        assert (demo / name).read_bytes() == (run / name).read_bytes()


def test_demo_again_applies_a_persons_answers(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert CliRunner().invoke(main, ["demo", "-o", str(out)]).exit_code == 0
    queue = ReviewQueue(out)
    before = len(queue.pending())
    question = queue.pending()[0]
    queue.answer(question["id"], "merge")
    again = CliRunner().invoke(main, ["demo", "-o", str(out)])
    assert again.exit_code == 0, again.output
    assert len(ReviewQueue(out).pending()) == before - 1
    mapping = orjson.loads((out / "relation_id_mapping.json").read_bytes())
    assert len({mapping[i] for i in question["member_ids"]}) == 1  # merged, as answered


def test_demo_into_another_run_needs_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "out"
    other = CliRunner().invoke(
        main, ["run", str(SAMPLE / "relations.jsonl"), "-o", str(out), "--no-semantic", "-q"]
    )
    assert other.exit_code == 0, other.output
    result = out / "deduplicate_relations_result.json"
    kept = result.read_bytes()
    refused = CliRunner().invoke(main, ["demo", "-o", str(out)])
    assert refused.exit_code == 2
    assert "--overwrite" in refused.output
    assert result.read_bytes() == kept
    replaced = CliRunner().invoke(main, ["demo", "-o", str(out), "--overwrite"])
    assert replaced.exit_code == 0, replaced.output
    assert orjson.loads(result.read_bytes())["embedding_model"] == "use-multilingual-v3"
