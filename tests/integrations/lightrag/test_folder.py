"""LightRAG / nano-graphrag working folder → relmerge → working folder, through the CLI."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from relmerge.adapters.common import md5_hex
from relmerge.integrations.lightrag.folder import entity_id, import_lightrag
from tests.adapters.fixtures import (
    REAL,
    SEP,
    cli,
    nano_from_sample,
    read_graphml_edges,
    read_graphml_nodes,
    write_graphml,
)

GRAPH = "graph_chunk_entity_relation.graphml"
PARTNER = "Marley was Scrooge's partner in the counting-house."
WARNING = "A ghost in chains warns of three spirits to come."
NODES = {
    '"SCROOGE"': {"entity_type": '"PERSON"', "description": '"A miser."<SEP>"Redeemed."'},
    '"MARLEY"': {"entity_type": '"PERSON"', "description": '"His late partner."'},
    '"FRED"': {"entity_type": '"PERSON"', "description": '"His nephew."'},
    '"BOB CRATCHIT"': {"entity_type": '"PERSON"', "description": '"His clerk."'},
    '"TINY TIM"': {"entity_type": '"PERSON"', "description": '"Bob\'s son."'},
}


def _edge(
    source: str, target: str, description: str, chunks: str, weight: float
) -> tuple[str, str, dict[str, str]]:
    data = {"weight": str(weight), "description": description, "source_id": chunks, "order": "1"}
    return source, target, data


def _folder(tmp_path: Path) -> Path:
    """nano-graphrag style: quoted ids and descriptions, a repeated extraction, a distinct
    fact on the same edge, an untouched edge, a self-loop and an empty fragment."""
    folder = tmp_path / "dickens"
    edges = [
        _edge(
            '"SCROOGE"',
            '"MARLEY"',
            SEP.join([f'"{PARTNER}"', f'"{PARTNER}"', f'"{WARNING}"']),
            "chunk-1<SEP>chunk-2",
            3.0,
        ),
        _edge('"BOB CRATCHIT"', '"TINY TIM"', '"Bob carries Tiny Tim."', "chunk-3", 1.0),
        _edge('"SCROOGE"', '"SCROOGE"', '"Scrooge talks to himself."', "chunk-1", 1.0),
        _edge('"SCROOGE"', '"FRED"', '"Fred is his nephew."<SEP> <SEP>', "chunk-4", 2.0),
    ]
    write_graphml(folder / GRAPH, NODES, edges)
    chunks = {f"chunk-{n}": {"content": "…", "full_doc_id": "doc-carol"} for n in range(1, 5)}
    (folder / "kv_store_text_chunks.json").write_bytes(orjson.dumps(chunks))
    (folder / "vdb_relationships.json").write_bytes(b'{"data": []}')
    return folder


def test_each_sep_description_becomes_one_record_citing_the_edges_chunks(tmp_path: Path) -> None:
    imported = import_lightrag(_folder(tmp_path))
    descriptions = [r["description"] for r in imported.relations]
    assert descriptions == [
        PARTNER,
        PARTNER,
        WARNING,
        "Bob carries Tiny Tim.",
        "Scrooge talks to himself.",
        "Fred is his nephew.",
    ]  # quotes stripped; the blank fragment is no extraction
    first = imported.relations[0]
    assert first["source_entity_id"] == "ent-" + md5_hex('"SCROOGE"')  # LightRAG's entity id
    assert (first["source_entity_name"], first["target_entity_name"]) == ("SCROOGE", "MARLEY")
    assert first["source_chunk_ids"] == ["chunk-1", "chunk-2"]
    assert (first["chunk_id"], first["document_id"]) == ("chunk-1", "doc-carol")
    assert first["relation_id"].startswith("rel-" + md5_hex('"SCROOGE""MARLEY"') + "-0-")
    assert len({r["relation_id"] for r in imported.relations}) == 6
    assert imported.counts == {"edges": 4, "edges_with_several_descriptions": 1}
    assert imported.entities[0] == {
        "entity_id": entity_id('"SCROOGE"'),
        "name": "SCROOGE",
        "type": "PERSON",
        "profile": "A miser. Redeemed.",
    }


def _pipeline(tmp_path: Path, source: Path, *run_args: str) -> tuple[Path, Path, str]:
    work, target = tmp_path / "work", tmp_path / "dedup"
    code, text = cli("import", "lightrag", str(source), "--output", str(work))
    assert code == 0, text
    assert "relmerge export lightrag" in text
    code, run_text = cli(
        "run",
        str(work / "relations.jsonl"),
        "--entities",
        str(work / "entities.jsonl"),
        "--output",
        str(work / "run"),
        "--embedding",
        "hash",
        "-q",
        *run_args,
    )
    assert code == 0, run_text
    code, export_text = cli(
        "export", "lightrag", str(work / "run"), "--original", str(source), "--to", str(target)
    )
    assert code == 0, export_text
    return work, target, export_text


def _check_nothing_lost(source: Path, target: Path) -> None:
    """Nodes unchanged; every original edge's chunks are still on an edge of its pair."""
    assert read_graphml_nodes(target / GRAPH) == read_graphml_nodes(source / GRAPH)
    chunks: dict[frozenset[str], set[str]] = {}
    for source_id, target_id, data in read_graphml_edges(target / GRAPH):
        pair = frozenset((source_id, target_id))
        chunks.setdefault(pair, set()).update(data["source_id"].split(SEP))
    for source_id, target_id, data in read_graphml_edges(source / GRAPH):
        assert set(data["source_id"].split(SEP)) <= chunks[frozenset((source_id, target_id))]


def test_repeated_extractions_merge_distinct_facts_stay_and_the_rest_is_untouched(
    tmp_path: Path,
) -> None:
    source = _folder(tmp_path)
    _, target, text = _pipeline(tmp_path, source)
    assert "Wrote 4 edges (4 before, 1 rewritten) holding 5 descriptions (6 before)" in text
    before, after = read_graphml_edges(source / GRAPH), read_graphml_edges(target / GRAPH)
    assert after[0][2]["description"] == f'"{PARTNER}"{SEP}"{WARNING}"'
    assert after[0][2]["source_id"] == before[0][2]["source_id"]
    assert after[0][2]["weight"] == before[0][2]["weight"]  # edge-level already
    assert after[1:] == before[1:]  # untouched, the self-loop the run rejected included
    _check_nothing_lost(source, target)
    assert (target / "vdb_relationships.json").read_bytes() == b'{"data": []}'
    assert (target / "kv_store_text_chunks.json").is_file()

    # LightRAG reads graphs with networkx: the export must load as the original does
    nx = pytest.importorskip("networkx")
    graph = nx.read_graphml(target / GRAPH)
    assert graph.number_of_edges() == 4
    assert graph.edges['"SCROOGE"', '"MARLEY"']["weight"] == 3.0

    # importing the export again: the merged repeat is gone, nothing else changed
    again = import_lightrag(target)
    assert len(again.relations) == 5


def test_an_entity_mapping_folds_an_alias_edge_into_its_canonical_edge(tmp_path: Path) -> None:
    """LightRAG-style file (no quotes, keywords): the edge of the alias disappears, its
    chunks and weight join the canonical edge; nodes stay as they were."""
    folder = tmp_path / "rag_storage"
    nodes = {name: {"entity_type": "PERSON"} for name in ("Scrooge", "Ebenezer", "Marley")}
    edges = [
        ("Scrooge", "Marley", {"weight": "2.0", "description": PARTNER, "source_id": "c-1"}),
        ("Ebenezer", "Marley", {"weight": "5.0", "description": PARTNER, "source_id": "c-2"}),
    ]
    for _, _, data in edges:
        data["keywords"] = "business partners"
    write_graphml(folder / GRAPH, nodes, edges, ("weight", "description", "source_id", "keywords"))
    mapping = tmp_path / "entity_mapping.json"
    mapping.write_bytes(orjson.dumps({entity_id("Ebenezer"): entity_id("Scrooge")}))
    _, target, text = _pipeline(tmp_path, folder, "--entity-mapping", str(mapping))
    assert "Wrote 1 edge (2 before, 1 rewritten)" in text
    [(source_id, target_id, data)] = read_graphml_edges(target / GRAPH)
    assert (source_id, target_id) == ("Scrooge", "Marley")
    assert data == {
        "weight": "7.0",
        "description": PARTNER,
        "source_id": f"c-1{SEP}c-2",
        "keywords": "business partners",
    }
    assert read_graphml_nodes(target / GRAPH) == read_graphml_nodes(folder / GRAPH)


def test_export_refuses_an_original_changed_since_the_import(tmp_path: Path) -> None:
    source = _folder(tmp_path)
    work, _, _ = _pipeline(tmp_path, source)
    graph = source / GRAPH
    graph.write_text(graph.read_text().replace("counting-house", "warehouse"))
    code, text = cli(
        "export", "lightrag", str(work / "run"), "--original", str(source), "--to", "elsewhere"
    )
    assert code == 2 and "does not come from this original" in text


def test_a_lone_graphml_file_and_bad_files(tmp_path: Path) -> None:
    graph = _folder(tmp_path) / GRAPH
    imported = import_lightrag(graph)
    assert imported.relations[0]["document_id"] == "unknown"  # no chunk store beside it
    (tmp_path / "broken.graphml").write_text("<graphml><edge")
    code, text = cli("import", "lightrag", str(tmp_path / "broken.graphml"), "--output", "w")
    assert code == 2 and "not valid XML" in text
    code, text = cli("import", "lightrag", str(tmp_path), "--output", "w")
    assert code == 2 and f"no {GRAPH}" in text


@pytest.mark.skipif(not REAL.is_dir(), reason="shared real data not present")
@pytest.mark.parametrize(
    ("sample", "records"),
    [("nanographrag-christmas-carol", 318), ("nanographrag-anesthesia-zh", 437)],
)
def test_the_real_graphs_round_trip_with_nothing_lost(
    tmp_path: Path, sample: str, records: int
) -> None:
    source = nano_from_sample(tmp_path / "dickens", sample)
    assert len(import_lightrag(source).relations) == records
    work, target, _ = _pipeline(tmp_path, source)
    _check_nothing_lost(source, target)
    summary = orjson.loads((target / "relmerge_export.json").read_bytes())
    result = orjson.loads((work / "run" / "deduplicate_relations_result.json").read_bytes())
    rejected = result["rejected_count"]  # self-loop edges: kept as they were
    assert summary["descriptions_after"] == result["output_relation_count"] + rejected
    assert summary["edges_after"] == summary["edges_before"]  # merges stay inside an edge
