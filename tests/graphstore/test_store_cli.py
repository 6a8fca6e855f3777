"""``relmerge store`` through a real subprocess, on both backends where a store is used."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from relmerge.data import sample_dir
from relmerge.io.load import read_entities, read_jsonl
from relmerge.io.records import validate_records
from tests.graphstore.graphs import raw_execute
from tests.support.postgres import PostgresServer

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = sample_dir()


def relmerge(
    *args: str | Path, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "relmerge", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def info(url: str) -> dict[str, object]:
    done = relmerge("store", "info", url, "--json")
    assert done.returncode == 0, done.stderr
    figures: dict[str, object] = orjson.loads(done.stdout)
    return figures


def sample_with_a_bad_record(folder: Path) -> Path:
    lines = (SAMPLE / "relations.jsonl").read_bytes().splitlines()
    bad = orjson.dumps({"relation_id": "bad_1", "chunk_id": "c"})  # missing fields
    path = folder / "relations.jsonl"
    path.write_bytes(b"\n".join([*lines[:3], bad, *lines[3:]]) + b"\n")
    return path


def test_init_load_info_dump_undo(store_url: str, tmp_path: Path) -> None:
    created = relmerge("store", "init", store_url)
    assert (
        created.returncode == 0 and "Created a relmerge store (schema version 2)" in created.stdout
    )
    again = relmerge("store", "init", store_url)
    assert again.returncode == 0 and "already a relmerge store" in again.stdout

    source = sample_with_a_bad_record(tmp_path)
    rejected = tmp_path / "rejected.jsonl"
    loaded = relmerge(
        "store",
        "load",
        store_url,
        source,
        "--entities",
        SAMPLE / "entities.jsonl",
        "--rejected",
        rejected,
        "--batch-id",
        "sample",
    )
    assert loaded.returncode == 0, loaded.stderr
    valid, _ = validate_records(read_jsonl(SAMPLE / "relations.jsonl"))
    assert f"Loaded batch sample into {store_url}: {len(valid)} relations inserted" in loaded.stdout
    assert "1 record set aside" in loaded.stdout
    assert "set aside: relations.jsonl:4: missing field 'document_id'" in loaded.stderr
    assert [orjson.loads(line)["origin"] for line in rejected.read_bytes().splitlines()] == [
        "relations.jsonl:4"
    ]

    figures = info(store_url)
    assert figures["relations"] == len(valid) and figures["batches"] == 1
    assert figures["entities"] == len(read_entities(SAMPLE / "entities.jsonl"))
    assert figures["last_batches"][0]["batch_id"] == "sample"  # type: ignore[index]

    out = tmp_path / "dump" / "graph.jsonl"
    dumped = relmerge("store", "dump", store_url, out)
    assert dumped.returncode == 0, dumped.stderr
    assert f"Dumped {len(valid)} relations" in dumped.stdout
    assert [orjson.loads(line) for line in out.read_bytes().splitlines()] == [
        r.to_dict() for r in valid
    ]
    assert [p.name for p in out.parent.iterdir()] == ["graph.jsonl"]  # no temporary left

    undone = relmerge("store", "undo", store_url, "sample")
    assert undone.returncode == 0 and f"removed {len(valid)} relations" in undone.stdout
    assert info(store_url)["relations"] == 0
    twice = relmerge("store", "undo", store_url, "sample")
    assert twice.returncode == 0 and "already undone" in twice.stdout


def test_undo_refused_names_the_later_batch(store_url: str, tmp_path: Path) -> None:
    relmerge("store", "init", store_url)
    first = tmp_path / "first.jsonl"
    first.write_bytes((SAMPLE / "relations.jsonl").read_bytes())
    assert relmerge("store", "load", store_url, first, "--batch-id", "one").returncode == 0
    # The same relations again, one changed: refused whole, nothing stored.
    records = [orjson.loads(line) for line in first.read_bytes().splitlines() if line.strip()]
    records[0]["description"] = "Another description."
    second = tmp_path / "second.jsonl"
    second.write_bytes(b"\n".join(orjson.dumps(r) for r in records))
    refused = one_line_error(relmerge("store", "load", store_url, second))
    assert f"{records[0]['relation_id']!r}" in refused and "merge-into" in refused
    # A later load of one of its relations, unchanged, maps that id to it: undoing "one"
    # would orphan the mapping, so it waits until "two" is undone.
    third = tmp_path / "third.jsonl"
    third.write_bytes(orjson.dumps(records[1]) + b"\n")
    assert relmerge("store", "load", store_url, third, "--batch-id", "two").returncode == 0
    error = one_line_error(relmerge("store", "undo", store_url, "one"))
    assert "later batch(es) two" in error
    assert relmerge("store", "undo", store_url, "two").returncode == 0
    assert relmerge("store", "undo", store_url, "one").returncode == 0


def test_load_reads_a_relmerge_run_output(tmp_path: Path) -> None:
    out = tmp_path / "run"
    ran = relmerge(
        "run",
        SAMPLE / "relations.jsonl",
        "--output",
        out,
        "--llm",
        "none",
        "--embedding",
        "hash",
        "--no-semantic",
        "-q",
    )
    assert ran.returncode == 0, ran.stderr
    url = f"sqlite:///{tmp_path / 'graph.db'}"
    relmerge("store", "init", url)
    assert relmerge("store", "load", url, out).returncode == 0
    keys = orjson.loads((out / "deduplicated_relation_keys.json").read_bytes())
    relmerge("store", "dump", url, tmp_path / "dump.jsonl")
    dumped = [orjson.loads(line) for line in (tmp_path / "dump.jsonl").read_bytes().splitlines()]
    assert [f"deduplicated_relations/{r['relation_id']}.json" for r in dumped] == keys
    # The folder of relation files alone is a graph too: the same relations, already there.
    again = relmerge("store", "load", url, out / "deduplicated_relations", "--batch-id", "files")
    assert again.returncode == 0 and f"0 relations inserted, {len(keys)} already stored" in (
        again.stdout
    )


def test_a_wrong_scheme_is_one_line_with_the_password_hidden() -> None:
    error = one_line_error(relmerge("store", "info", "mysql://ann:hunter22@db/graph"))
    assert "unsupported relation store URL mysql://ann:***@db/graph" in error
    assert "sqlite://" in error and "postgresql://" in error and "hunter22" not in error
    assert "sqlite:///" in one_line_error(relmerge("store", "init", "graph.db"))


def test_an_unreachable_server_is_one_line_exit_2() -> None:
    with socket.socket() as probe:  # a port where nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pytest.importorskip("psycopg")
    error = one_line_error(
        relmerge("store", "info", f"postgresql://ann:hunter22@127.0.0.1:{port}/graph")
    )
    assert f"cannot connect to the store postgresql://ann:***@127.0.0.1:{port}/graph" in error
    assert "hunter22" not in error


def test_server_errors_never_show_the_password(postgres_server: PostgresServer) -> None:
    url = postgres_server.url("no_such_database").replace("relmerge@", "relmerge:hunter22@")
    error = one_line_error(relmerge("store", "info", url))
    assert "no_such_database" in error and "relmerge:***@" in error and "hunter22" not in error
    query = postgres_server.url("no_such_database") + "&password=hunter22"
    error = one_line_error(relmerge("store", "info", query))
    assert "password=***" in error and "hunter22" not in error


def test_a_store_of_another_schema_version_is_exit_2(store_url: str, tmp_path: Path) -> None:
    relmerge("store", "init", store_url)
    raw_execute(store_url, "UPDATE relmerge_meta SET value = '3' WHERE key = 'schema_version'")
    for command in (
        ("info", store_url),
        ("dump", store_url, tmp_path / "x.jsonl"),
        ("init", store_url),
    ):
        error = one_line_error(relmerge("store", *command))
        assert "schema version 3" in error and "upgrade relmerge" in error
    assert not (tmp_path / "x.jsonl").exists()


def test_not_a_store_is_exit_2(tmp_path: Path) -> None:
    text = tmp_path / "notes.db"
    text.write_text("not a database\n" * 100)
    error = one_line_error(relmerge("store", "info", f"sqlite:///{text}"))
    assert "not a SQLite database" in error
    error = one_line_error(
        relmerge("store", "dump", f"sqlite:///{tmp_path / 'none.db'}", tmp_path / "o.jsonl")
    )
    assert "relmerge store init" in error
    assert not (tmp_path / "none.db").exists()  # reading never creates a store


SCRIPT = """
import sys
class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "psycopg":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Absent())
from relmerge.cli import main
main()
"""


def test_postgresql_without_the_extra_names_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, "store", "info", "postgresql://ann:hunter22@db/graph"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    error = one_line_error(done)
    assert "pip install 'relmerge[postgres]'" in error and "hunter22" not in error
