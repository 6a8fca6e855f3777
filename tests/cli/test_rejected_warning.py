"""Rejected records are said on stderr, not only in a summary row: how many, the first
reasons with their lines, and where they are; the run still exits 0 (they are recorded
issues; ``--strict`` fails)."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.factories import record
from tests.support.cli_process import relmerge


def _jsonl(path: Path, lines: list[bytes], end: bytes = b"\n") -> Path:
    path.write_bytes(b"\n".join(lines) + end)
    return path


def _warning(stderr: str) -> list[str]:
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("warning: "))
    return [lines[start], *(line for line in lines[start + 1 :] if line.startswith("  "))]


def test_a_record_cut_off_mid_write_is_named_on_stderr(tmp_path: Path) -> None:
    """The last record of the file was cut mid-write (no line end after it)."""
    lines = [orjson.dumps(record(f"r{n}", description=f"Fact {n}.")) for n in range(1, 5)]
    source = _jsonl(tmp_path / "relations.jsonl", [*lines[:3], lines[3][:70]], end=b"")
    out = tmp_path / "out"
    done = relmerge("run", source, "-o", out, "--no-semantic")
    assert done.returncode == 0, done.stderr
    warning = _warning(done.stderr)
    assert warning[0] == f"warning: 1 input record rejected, set aside in {out / 'rejected.jsonl'}:"
    assert warning[1].startswith("  relations.jsonl:4: malformed JSON: unexpected end")
    assert warning[1].endswith("(the file's last line, without a line end: cut off mid-write?)")
    assert len(warning) == 2
    quiet = relmerge("run", source, "-o", out, "--no-semantic", "--overwrite", "-q")
    assert quiet.returncode == 0 and quiet.stderr == ""  # --quiet asked for silence
    rejected = [orjson.loads(line) for line in (out / "rejected.jsonl").read_bytes().splitlines()]
    assert [item["origin"] for item in rejected] == ["relations.jsonl:4"]
    mapping = orjson.loads((out / "relation_id_mapping.json").read_bytes())
    assert sorted(mapping) == ["r1", "r2", "r3"]


def test_many_rejected_records_show_the_first_reasons_and_how_many_more(tmp_path: Path) -> None:
    bad = [b'{"relation_id": "broken", ', b"[1, 2]", b"42", b"null", b'"text"']
    good = [orjson.dumps(record("r1"))]
    source = _jsonl(tmp_path / "relations.jsonl", [*good, *bad])
    done = relmerge("run", source, "-o", tmp_path / "out", "--no-semantic")
    assert done.returncode == 0, done.stderr
    warning = _warning(done.stderr)
    assert warning[0] == (
        f"warning: 5 input records rejected, set aside in {tmp_path / 'out' / 'rejected.jsonl'}:"
    )
    assert warning[1].startswith("  relations.jsonl:2: malformed JSON: unexpected end of data")
    assert warning[2:] == [
        "  relations.jsonl:3: a relation must be a JSON object, not an array",
        "  relations.jsonl:4: a relation must be a JSON object, not a number",
        "  … and 2 more",
    ]


def test_a_run_with_nothing_rejected_warns_of_nothing(tmp_path: Path) -> None:
    source = _jsonl(tmp_path / "relations.jsonl", [orjson.dumps(record("r1"))])
    done = relmerge("run", source, "-o", tmp_path / "out", "--no-semantic")
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
