"""A JSON array is input like JSONL; another tool's graph gets the command to convert it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from relmerge.cli import main
from relmerge.errors import InputError
from relmerge.io.load import read_input, read_jsonl
from tests.adapters.fixtures import entity, relationship, write_graphml, write_graphrag
from tests.adapters.upstream import UPSTREAM, needs_upstream
from tests.factories import record
from tests.support.cli_process import error_line, relmerge


def _run(source: Path, tmp_path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(
        main, ["run", str(source), "-o", str(tmp_path / "out"), "--no-semantic", "-q"]
    )
    return result.exit_code, result.output


def test_a_pretty_printed_json_array_is_read_like_jsonl(tmp_path: Path) -> None:
    records = [record("r1"), record("r2", description="Another fact.")]
    array = tmp_path / "relations.json"
    array.write_bytes(b"\xef\xbb\xbf" + orjson.dumps(records, option=orjson.OPT_INDENT_2))
    raws = asyncio.run(read_input(array))
    assert [raw.data for raw in raws] == records
    assert [raw.origin for raw in raws] == ["relations.json:item 1", "relations.json:item 2"]
    code, text = _run(array, tmp_path)
    assert code == 0, text
    mapping = orjson.loads((tmp_path / "out" / "relation_id_mapping.json").read_bytes())
    assert sorted(mapping) == ["r1", "r2"]


def test_a_broken_json_array_is_one_error(tmp_path: Path) -> None:
    broken = tmp_path / "relations.json"
    broken.write_text('[\n  {"relation_id": "r1",\n', encoding="utf-8")
    code, text = _run(broken, tmp_path)
    assert code == 2 and len(text.strip().splitlines()) == 1
    assert "opens a JSON array but is not valid JSON" in text


def _lightrag(folder: Path) -> Path:
    nodes = {"A": {"entity_type": "PERSON"}, "B": {"entity_type": "PERSON"}}
    edges = [("A", "B", {"weight": "1.0", "description": "A knows B.", "source_id": "c1"})]
    return write_graphml(folder / "graph_chunk_entity_relation.graphml", nodes, edges)


@pytest.mark.parametrize(
    ("kind", "command"),
    [
        ("graphml", "relmerge import lightrag"),
        ("lightrag folder", "relmerge import lightrag"),
        ("graphrag folder", "relmerge import graphrag"),
        ("graphrag table", "relmerge import graphrag"),
        ("xml under another name", "relmerge import lightrag"),
    ],
)
def test_another_tools_graph_names_the_import_command(
    tmp_path: Path, kind: str, command: str
) -> None:
    graph = _lightrag(tmp_path / "rag_storage")
    graphrag = write_graphrag(
        tmp_path / "output",
        [relationship("r", "A", "B", "A knows B.", ["t"], 1.0)],
        [entity("a", "A", "PERSON", "A.")],
    )
    renamed = tmp_path / "graph.txt"
    renamed.write_bytes(graph.read_bytes())
    source = {
        "graphml": graph,
        "lightrag folder": graph.parent,
        "graphrag folder": graphrag,
        "graphrag table": graphrag / "relationships.parquet",
        "xml under another name": renamed,
    }[kind]
    code, text = _run(source, tmp_path)
    assert code == 2 and len(text.strip().splitlines()) == 1, text
    shown = source.parent if source.name == "graph_chunk_entity_relation.graphml" else source
    assert f"`{command} {shown} --output " in text
    assert not (tmp_path / "out").exists()


def _jsonl(items: list[dict[str, object]]) -> bytes:
    return b"".join(orjson.dumps(item) + b"\n" for item in items)


@needs_upstream
def test_a_graphrag_csv_table_names_the_import_command_that_reads_it(tmp_path: Path) -> None:
    """A GraphRAG 3 relationships table (as GraphRAG wrote it), saved under another name:
    the error says what it is and the command to run; that command then works."""
    table = tmp_path / "edges.csv"
    table.write_bytes((UPSTREAM / "graphrag" / "v3-tests-verbs" / "relationships.csv").read_bytes())
    line = error_line(
        relmerge("run", table, "-o", tmp_path / "out", "--no-semantic", "-q"),
        f"{table} is a CSV table with the columns of a GraphRAG relationships table",
        "source, target, description",
    )
    assert "malformed JSON" not in line
    assert not (tmp_path / "out").exists()
    command = line.split("`")[1].split()
    assert command[:3] == ["relmerge", "import", "graphrag"]
    done = relmerge(*command[1:])
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "edges-relmerge" / "relations.jsonl").stat().st_size > 0


@pytest.mark.parametrize(
    ("name", "content", "kind"),
    [
        ("relations.tsv", "relation_id\tname\tdescription\nr1\tknows\tA knows B.\n", "TSV"),
        ("relations.csv", "\ufeffrelation_id;name\nr1;knows\n", "CSV"),
        # No telling name: a header row and a row of as many cells are enough.
        ("relations.txt", 'relation_id,name,description\nr1,knows,"A, B."\n', "CSV"),
    ],
)
def test_a_table_says_it_is_one_and_what_relmerge_reads(
    tmp_path: Path, name: str, content: str, kind: str
) -> None:
    table = tmp_path / name
    table.write_text(content, encoding="utf-8")
    line = error_line(
        relmerge("run", table, "-o", tmp_path / "out", "--no-semantic", "-q"),
        f"{table} looks like a {kind} table (header: relation_id, name",
        "relmerge reads JSONL, one JSON object per line with the 12 fields of ExtractedRelation",
        "relation_id, chunk_id, document_id, source_entity_id, target_entity_id, "
        "source_entity_name, target_entity_name, type, name, description, attributes, "
        "source_chunk_ids",
    )
    assert ("relmerge import graphrag" in line) == (kind == "CSV")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("name", "lines", "rejected"),
    [
        # JSON lines in a file named .csv are JSON lines.
        ("relations.csv", [], 0),
        # A stray first line with commas is one rejected line, not a table.
        ("relations.jsonl", [b"exported by tool, version 2"], 1),
    ],
)
def test_json_lines_are_never_taken_for_a_table(
    tmp_path: Path, name: str, lines: list[bytes], rejected: int
) -> None:
    source = tmp_path / name
    records = [record("r1"), record("r2", description="Another fact, with a comma.")]
    source.write_bytes(b"".join(line + b"\n" for line in lines) + _jsonl(records))
    done = relmerge("run", source, "-o", tmp_path / "out", "--no-semantic", "-q")
    assert done.returncode == 0, done.stderr
    result = orjson.loads((tmp_path / "out" / "deduplicate_relations_result.json").read_bytes())
    assert result["input_relation_count"] == 2 and result["rejected_count"] == rejected


def test_a_json_array_is_read_item_by_item(tmp_path: Path) -> None:
    """The first items arrive before the parser reaches the break at the end: the array
    is never parsed whole. The break is then one error naming the item it came after."""
    items = [record(f"r{n}") for n in range(1, 4)]
    broken = tmp_path / "relations.json"
    broken.write_bytes(orjson.dumps(items)[:-20])  # cut inside the third item
    read = read_jsonl(broken)
    assert [next(read).origin, next(read).origin] == [
        "relations.json:item 1",
        "relations.json:item 2",
    ]
    with pytest.raises(
        InputError, match=r"not valid JSON after item 2 \(parse error: premature EOF\)"
    ):
        next(read)
    line = error_line(relmerge("run", broken, "-o", tmp_path / "out", "--no-semantic", "-q"))
    assert f"{broken} opens a JSON array but is not valid JSON after item 2" in line
    assert not (tmp_path / "out").exists()


def test_json_lines_whose_first_line_is_an_array_stay_json_lines(tmp_path: Path) -> None:
    source = tmp_path / "relations.jsonl"
    source.write_bytes(b"[1, 2]\n" + _jsonl([record("r1")]))
    raws = list(read_jsonl(source))
    assert [raw.origin for raw in raws] == ["relations.jsonl:1", "relations.jsonl:2"]
    assert raws[0].data == [1, 2]  # rejected later as "not an object", with its line


def _peak_rss_kib(*args: str | Path) -> int:
    """Peak memory of ``relmerge ARGS`` in a fresh interpreter, as it reports it: VmHWM,
    its own high-water mark (ru_maxrss would carry over the test process's, across exec)."""
    code = (
        "import atexit, re, sys\n"
        "hwm = lambda: re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1]\n"
        "atexit.register(lambda: print('peak', hwm(), file=sys.stderr))\n"
        "from relmerge.cli import main\n"
        f"main({[str(arg) for arg in args]!r})\n"
    )
    root = Path(__file__).resolve().parents[2]
    path = os.pathsep.join(filter(None, [str(root / "src"), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return int(done.stderr.split("peak ")[-1].split()[0])


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads /proc (Linux)")
def test_a_large_one_line_json_array_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """A dry run over a 40 MB one-line array grows by far less than the file: before, the
    whole file and every parsed item sat in memory at once (about 4 times the file)."""
    text = "A fact told at length. " * 90  # about 2 KB a record
    items = [record(f"r{n}", description=f"{n}: {text}") for n in range(20_000)]
    large = tmp_path / "large.json"
    large.write_bytes(orjson.dumps(items))
    small = tmp_path / "small.json"
    small.write_bytes(orjson.dumps(items[:10]))
    size_kib = large.stat().st_size // 1024
    assert size_kib > 35_000
    base = _peak_rss_kib("run", small, "-o", tmp_path / "out", "--dry-run")
    peak = _peak_rss_kib("run", large, "-o", tmp_path / "out", "--dry-run")
    assert peak - base < size_kib * 0.4, (base, peak, size_kib)
