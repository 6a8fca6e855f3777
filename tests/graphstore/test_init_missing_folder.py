"""``relmerge store init`` creates the store's file, never the folders a typo in the URL
names: a missing folder is refused with one line that says what to do."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli_process import error_line, relmerge


def test_init_refuses_a_missing_folder_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent" / "dir"
    line = error_line(relmerge("store", "init", f"sqlite:///{missing / 'x.db'}"))
    assert f"the directory {missing} does not exist" in line
    assert "create it first" in line
    assert not (tmp_path / "nonexistent").exists()


def test_init_creates_the_file_in_a_folder_that_exists(tmp_path: Path) -> None:
    done = relmerge("store", "init", "sqlite:///graph.db", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Created a relmerge store" in done.stdout
    assert (tmp_path / "graph.db").is_file()
