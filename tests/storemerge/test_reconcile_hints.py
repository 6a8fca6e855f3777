"""What ``reconcile`` and ``merge-into`` folders tell a person to run: the command that
made the folder (recorded in OUT/.relmerge/run.json, else read from its files), never
``relmerge run``; and ``reconcile --dry-run`` needs no --output, as it writes nothing."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from relmerge.data import sample_dir
from tests.support.cli_process import piped, relmerge

SAMPLE = sample_dir()
ENTITIES = ("--entities", str(SAMPLE / "entities.jsonl"), "--embedding", "hash")


@pytest.fixture
def store(tmp_path: Path) -> str:
    """A SQLite store holding the sample, not deduplicated."""
    url = f"sqlite:///{tmp_path / 'graph.db'}"
    assert relmerge("store", "init", url).returncode == 0
    loaded = relmerge("store", "load", url, SAMPLE / "relations.jsonl")
    assert loaded.returncode == 0, loaded.stderr
    return url


def forget_command(out: Path) -> None:
    """OUT as an older relmerge (or the Python API) leaves it: no command on record."""
    marker = out / ".relmerge" / "run.json"
    record = orjson.loads(marker.read_bytes())
    record.pop("command")
    marker.write_bytes(orjson.dumps(record))


def test_a_reconcile_folder_names_reconcile(store: str, tmp_path: Path) -> None:
    out = tmp_path / "rec1"
    done = relmerge("reconcile", store, "--output", out, *ENTITIES, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Answer them: relmerge review" in done.stdout
    reviewed = piped("review", out, keys="mq", cwd=tmp_path)
    assert reviewed.returncode == 0, reviewed.stderr
    assert f"relmerge reconcile {store} --output {out}" in reviewed.stdout
    assert "relmerge run" not in reviewed.stdout
    applied = piped("review", out, "--apply", keys="", cwd=tmp_path)
    assert applied.returncode == 0, applied.stderr
    assert f"applying: relmerge reconcile {store}" in applied.stdout
    assert "reconcile: proposal written to" in applied.stdout

    report = relmerge("report", out)
    assert report.returncode == 2 and "relmerge run INPUT" not in report.stderr
    assert f"`relmerge reconcile URL --output {out} …`" in report.stderr
    assert "reconcile_result.json" in report.stderr

    forget_command(out)
    piped("review", out, keys="kq", cwd=tmp_path)  # a new answer to apply
    hinted = piped("review", out, keys="q", cwd=tmp_path)
    words = " ".join(hinted.stdout.split())
    assert f"run `relmerge reconcile URL --output {out} …` again" in words, words
    refused = relmerge("review", out, "--apply")
    assert refused.returncode == 2 and "relmerge run" not in refused.stderr
    assert f"`relmerge reconcile URL --output {out} …`" in refused.stderr


def test_a_merge_into_folder_names_merge_into(store: str, tmp_path: Path) -> None:
    out = tmp_path / "merge1"
    batch = SAMPLE / "relations.jsonl"
    done = relmerge("merge-into", store, batch, "--output", out, "--llm", "none", *ENTITIES)
    assert done.returncode == 0, done.stderr
    forget_command(out)
    refused = relmerge("review", out, "--apply")
    assert refused.returncode == 2 and "relmerge run" not in refused.stderr
    assert f"`relmerge merge-into URL INPUT --output {out} …`" in refused.stderr


def test_reconcile_dry_run_needs_no_output(store: str, tmp_path: Path) -> None:
    done = relmerge("reconcile", store, "--dry-run", *ENTITIES, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "nothing asked, nothing written" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.db"]


def test_reconcile_without_output_is_a_usage_error(store: str, tmp_path: Path) -> None:
    done = relmerge("reconcile", store, *ENTITIES, cwd=tmp_path)
    assert done.returncode == 2
    assert "Missing option '--output'" in done.stderr and "--dry-run" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.db"]
