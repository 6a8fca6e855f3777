"""Exports are written whole or not at all: a failure midway leaves --to as it was."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from relmerge.adapters.graphml import GraphmlDocument
from relmerge.adapters.tables import Table
from tests.adapters.fixtures import cli, entity, relationship, write_graphml, write_graphrag

SCROOGE, MARLEY = "EBENEZER SCROOGE", "JACOB MARLEY"
PARTNERS = "Scrooge and Marley were partners in the counting-house for many years."


def _graphrag_run(tmp_path: Path) -> tuple[Path, Path]:
    source = write_graphrag(
        tmp_path / "output",
        [
            relationship("r-a", SCROOGE, MARLEY, PARTNERS, ["tu-1"], 2.0),
            relationship("r-b", MARLEY, SCROOGE, PARTNERS, ["tu-2"], 3.0),
        ],
        [entity("e-s", SCROOGE, "PERSON", "A miser."), entity("e-m", MARLEY, "PERSON", "Dead.")],
    )
    work = tmp_path / "work"
    assert cli("import", "graphrag", str(source), "--output", str(work))[0] == 0
    config = tmp_path / "undirected.toml"
    config.write_text('symmetric_relations = ["related"]\n', encoding="utf-8")
    code, text = cli(
        "run", str(work / "relations.jsonl"), "--config", str(config),
        "--output", str(work / "run"), "--embedding", "hash", "-q",
    )  # fmt: skip
    assert code == 0, text
    return source, work / "run"


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def _leftovers(parent: Path) -> list[str]:
    return [path.name for path in parent.iterdir() if ".relmerge-" in path.name]


def _fail_on_relationships(monkeypatch: pytest.MonkeyPatch) -> None:
    """The relationships table is written after every other file: fail there."""
    original = Table.write

    def write(self: Table, rows: object, path: Path) -> None:
        if path.name == "relationships.parquet":
            assert (path.parent / "entities.parquet").is_file()  # the copy is under way
            raise OSError(28, "No space left on device")
        original(self, rows, path)  # type: ignore[arg-type]

    monkeypatch.setattr(Table, "write", write)


def test_a_failure_midway_leaves_no_destination(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, run = _graphrag_run(tmp_path)
    target = tmp_path / "dedup"
    _fail_on_relationships(monkeypatch)
    code, text = cli("export", "graphrag", str(run), "--original", str(source), "--to", str(target))
    assert code == 2
    lines = text.strip().splitlines()  # the phases done, then the error on one line
    assert [line for line in lines if not line.startswith("error: ")] == lines[:-1]
    assert "No space left on device" in lines[-1] and "not created" in lines[-1]
    assert not target.exists()
    assert _leftovers(tmp_path) == []


def test_a_failed_overwrite_leaves_the_old_destination_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, run = _graphrag_run(tmp_path)
    target = tmp_path / "dedup"
    args = ("export", "graphrag", str(run), "--original", str(source), "--to", str(target))
    assert cli(*args)[0] == 0
    (target / "notes.txt").write_text("mine", encoding="utf-8")
    before = _snapshot(target)
    _fail_on_relationships(monkeypatch)
    code, text = cli(*args, "--overwrite")
    assert code == 2 and "left as it was" in text
    assert _snapshot(target) == before
    assert _leftovers(tmp_path) == []

    monkeypatch.undo()
    code, text = cli(*args, "--overwrite")
    assert code == 0, text
    assert "notes.txt" not in _snapshot(target)  # replaced, not written into
    assert set(_snapshot(target)) == set(before) - {"notes.txt"}
    assert _leftovers(tmp_path) == []


def test_a_lightrag_export_failing_midway_leaves_no_destination(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "rag_storage"
    nodes = {name: {"entity_type": "PERSON"} for name in ("Scrooge", "Marley")}
    description = f"{PARTNERS}<SEP>{PARTNERS}"
    write_graphml(
        folder / "graph_chunk_entity_relation.graphml",
        nodes,
        [("Scrooge", "Marley", {"weight": "2.0", "description": description, "source_id": "c"})],
    )
    (folder / "kv_store_text_chunks.json").write_text("{}", encoding="utf-8")
    work = tmp_path / "work"
    assert cli("import", "lightrag", str(folder), "--output", str(work))[0] == 0
    code, text = cli(
        "run", str(work / "relations.jsonl"), "--output", str(work / "run"),
        "--embedding", "hash", "-q",
    )  # fmt: skip
    assert code == 0, text

    def fail(self: GraphmlDocument, path: Path) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(GraphmlDocument, "write", fail)
    target = tmp_path / "out" / "dedup"
    code, text = cli(
        "export", "lightrag", str(work / "run"), "--original", str(folder), "--to", str(target),
        "-q",
    )  # fmt: skip
    assert code == 2 and len(text.strip().splitlines()) == 1 and "Permission denied" in text
    assert not target.exists() and _leftovers(target.parent) == []


def test_the_destination_never_holds_what_the_export_reads(tmp_path: Path) -> None:
    source, run = _graphrag_run(tmp_path)
    for target, what in (
        (source, "original folder"),
        (source / "sub", "original folder"),
        (tmp_path, "holds the original folder"),
        (run.parent, "holds the run"),
    ):
        code, text = cli(
            "export", "graphrag", str(run), "--original", str(source), "--to", str(target),
            "--overwrite",
        )  # fmt: skip
        assert code == 2 and what in text, text
    cwd = Path.cwd()
    (tmp_path / "elsewhere").mkdir()
    os.chdir(tmp_path / "elsewhere")
    try:
        code, text = cli(
            "export", "graphrag", str(run), "--original", str(source), "--to", ".", "--overwrite"
        )
    finally:
        os.chdir(cwd)
    assert code == 2 and "working directory" in text
    assert _snapshot(source)  # nothing was removed


def test_a_lone_graphml_file_exports_beside_itself(tmp_path: Path) -> None:
    graph = tmp_path / "graph.graphml"
    nodes = {name: {"entity_type": "PERSON"} for name in ("Scrooge", "Marley")}
    description = f"{PARTNERS}<SEP>{PARTNERS}"
    edge = {"weight": "2.0", "description": description, "source_id": "c"}
    write_graphml(graph, nodes, [("Scrooge", "Marley", edge)])
    work = tmp_path / "work"
    assert cli("import", "lightrag", str(graph), "--output", str(work))[0] == 0
    code, text = cli(
        "run", str(work / "relations.jsonl"), "--output", str(work / "run"),
        "--embedding", "hash", "-q",
    )  # fmt: skip
    assert code == 0, text
    target = tmp_path / "dedup"
    code, text = cli(
        "export", "lightrag", str(work / "run"), "--original", str(graph), "--to", str(target)
    )
    assert code == 0, text
    assert (target / "graph.graphml").is_file() and graph.is_file()
    code, text = cli(
        "export", "lightrag", str(work / "run"), "--original", str(graph), "--to",
        str(tmp_path), "--overwrite",
    )  # fmt: skip
    assert code == 2 and "holds the original" in text
