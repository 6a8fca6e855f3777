"""A JSON array is input like JSONL; another tool's graph gets the command to convert it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from relmerge.cli import main
from relmerge.io.load import read_input
from tests.adapters.fixtures import entity, relationship, write_graphml, write_graphrag
from tests.factories import record


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
