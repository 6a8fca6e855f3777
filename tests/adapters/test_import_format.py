"""``relmerge import`` given the other tool's graph: the error names the format that reads
it, with a command that works, on the folders GraphRAG and LightRAG wrote themselves."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.adapters.upstream import UPSTREAM, needs_upstream
from tests.support.cli_process import error_line, relmerge

GRAPHRAG = UPSTREAM / "graphrag"
LIGHTRAG = UPSTREAM / "lightrag"
PIPELINE = LIGHTRAG / "lightrag-hku-1.5.7-pipeline"
HOME_LAB = LIGHTRAG / "home-lab-agentic-ai"


@needs_upstream
@pytest.mark.parametrize(
    ("fmt", "given", "what", "command"),
    [
        ("graphrag", PIPELINE, "a LightRAG working folder", ("lightrag", PIPELINE)),
        (
            "graphrag",
            HOME_LAB / "graph_chunk_entity_relation.graphml",
            "a GraphML graph",
            ("lightrag", HOME_LAB),  # its folder: the chunk store is read too
        ),
        (
            "lightrag",
            GRAPHRAG / "v3-operation-dulce",
            "a GraphRAG output folder",
            ("graphrag", GRAPHRAG / "v3-operation-dulce"),
        ),
        (
            "lightrag",
            GRAPHRAG / "v0.1-2024-07-operation-dulce",
            "a GraphRAG output folder",
            ("graphrag", GRAPHRAG / "v0.1-2024-07-operation-dulce"),
        ),
        (
            "lightrag",
            GRAPHRAG / "v3-tests-verbs" / "relationships.csv",
            "a GraphRAG relationships table",
            ("graphrag", GRAPHRAG / "v3-tests-verbs" / "relationships.csv"),
        ),
        (
            "lightrag",
            GRAPHRAG / "v3-tests-verbs" / "entities.parquet",
            "a table of a GraphRAG output folder",
            ("graphrag", GRAPHRAG / "v3-tests-verbs"),
        ),
    ],
)
def test_the_other_tools_graph_names_the_import_that_reads_it(
    tmp_path: Path, fmt: str, given: Path, what: str, command: tuple[str, Path]
) -> None:
    out = tmp_path / "imported"
    other, source = command
    expected = f"`relmerge import {other} {source} --output {out}`"
    line = error_line(relmerge("import", fmt, given, "--output", out), f"{given} is {what}, not")
    assert line.endswith(f"run {expected}"), line
    assert not out.exists()
    done = relmerge(*shlex.split(expected.strip("`"))[1:])  # as printed, it works
    assert done.returncode == 0, done.stderr
    assert (out / "relations.jsonl").stat().st_size > 0
