"""What ``merge-into`` and ``reconcile --pending`` tell a newcomer: each phase on stderr as
``run`` shows it, counts that say what they count, and a warning where no entity has a
profile. A real SQLite file, the CLI in a process of its own."""

from __future__ import annotations

import re
from pathlib import Path

import orjson

from relmerge.data import sample_dir
from relmerge.io.write import RESULT_FILE
from tests.storemerge.test_growing_graph_paths import _again_under_other_ids
from tests.support.cli_process import relmerge

SAMPLE = sample_dir()
MAPPING = ("--entity-mapping", str(SAMPLE / "entity_id_mapping.json"), "--embedding", "hash")
PROFILES = ("--entities", str(SAMPLE / "entities.jsonl"))


def _store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'graph.db'}"
    assert relmerge("store", "init", url).returncode == 0
    return url


def _merge(url: str, out: Path, *extra: str, source: Path | None = None) -> tuple[str, str]:
    done = relmerge(
        "merge-into", url, source or SAMPLE / "relations.jsonl", "-o", out, *MAPPING, *extra
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


def test_merge_into_shows_each_phase_on_stderr(tmp_path: Path) -> None:
    stdout, stderr = _merge(_store(tmp_path), tmp_path / "out", *PROFILES)
    phases = [line.split(":")[0] for line in stderr.splitlines() if " in " in line]
    assert phases == [
        "reading input",
        "reading the store",
        "exact stage",
        "embedding",
        "semantic stage",
        "writing",
    ]
    assert re.search(r"^writing: 14/14 relations in ", stderr, re.M), stderr
    assert "reading the store" not in stdout


def test_quiet_shows_no_phase(tmp_path: Path) -> None:
    _stdout, stderr = _merge(_store(tmp_path), tmp_path / "out", *PROFILES, "--quiet")
    assert stderr == ""


def test_a_batch_applied_before_counts_every_input_as_in_the_store(tmp_path: Path) -> None:
    url = _store(tmp_path)
    _merge(url, tmp_path / "out", *PROFILES)
    stdout, _ = _merge(url, tmp_path / "out", *PROFILES)
    assert "batch merge-" in stdout and " already_applied" in stdout
    assert "  already in the store: 17 (this batch was applied before: nothing changed)" in stdout


def test_joined_relations_say_how_many_changed(tmp_path: Path) -> None:
    url = _store(tmp_path)
    _merge(url, tmp_path / "first", *PROFILES)
    stdout, _ = _merge(url, tmp_path / "again", *PROFILES, source=_again_under_other_ids(tmp_path))
    result = orjson.loads((tmp_path / "again" / RESULT_FILE).read_bytes())["store"]
    joined, changed = result["joined_count"], result["joined_changed_count"]
    assert joined > changed  # the same facts again: most joins change no stored record
    assert (
        f"  stored relations joined: {joined} ({changed} changed; {joined - changed} already "
        "held what the batch brought" in stdout
    )
    info = relmerge("store", "info", url)
    assert info.returncode == 0
    assert re.search(rf"\b{changed}\b", info.stdout)


def test_a_batch_whose_entities_have_no_profile_is_warned(tmp_path: Path) -> None:
    url = _store(tmp_path)
    _stdout, stderr = _merge(url, tmp_path / "bare")
    assert "warning: none of the batch's 14 entities has a profile" in stderr
    assert "pass --entities FILE" in stderr
    (tmp_path / "other").mkdir()
    _stdout, stderr = _merge(_store(tmp_path / "other"), tmp_path / "profiled", *PROFILES)
    assert "profile" not in stderr


def test_pending_right_after_a_load_says_it_reads_every_loaded_pair(tmp_path: Path) -> None:
    url = _store(tmp_path)
    loaded = relmerge("store", "load", url, SAMPLE / "relations.jsonl")
    assert loaded.returncode == 0, loaded.stderr
    planned = relmerge("reconcile", url, "--pending", "--dry-run", "-o", tmp_path / "rec")
    assert planned.returncode == 0, planned.stderr
    assert "  pending: every pair a batch wrote (no reconcile yet: a loaded store is read " in (
        planned.stdout
    )
