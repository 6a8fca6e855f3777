"""GraphRAG output folder → relmerge → GraphRAG output folder, through the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped, unused-ignore]
import pytest

from relmerge.adapters.graphrag import import_graphrag, synthetic_entity_id
from tests.adapters.fixtures import (
    REAL,
    cli,
    entity,
    graphrag_from_sample,
    read_rows,
    relationship,
    write_graphrag,
)

SCROOGE, MARLEY, FRED = "EBENEZER SCROOGE", "JACOB MARLEY", "FRED"
PARTNERS = "Scrooge and Marley were partners in the counting-house for many years."


def _folder(tmp_path: Path) -> Path:
    """Five rows: a reversed duplicate pair (to merge), two distinct facts of another pair,
    a row without description (rejected by the run) and an endpoint not in entities."""
    relationships = [
        relationship("r-a", SCROOGE, MARLEY, PARTNERS, ["tu-1", "tu-2"], 6.0),
        relationship(
            "r-b", SCROOGE, FRED, "Fred is the son of Scrooge's late sister Fan.", ["tu-1"], 4.0
        ),
        relationship("r-c", MARLEY, SCROOGE, PARTNERS, ["tu-3", "tu-2"], 2.0),
        relationship(
            "r-d", FRED, SCROOGE, "A dinner invitation, refused with a humbug.", ["tu-4"], 3.0
        ),
        relationship("r-e", "BOB CRATCHIT", SCROOGE, "", ["tu-5"], 1.0),
    ]
    entities = [
        entity("e-scrooge", SCROOGE, "PERSON", "A miser who learns generosity."),
        entity("e-marley", MARLEY, "PERSON", "Scrooge's dead business partner."),
        entity("e-fred", FRED, "PERSON", "Scrooge's cheerful nephew."),
    ]
    return write_graphrag(tmp_path / "output", relationships, entities, {"tu-1": "doc-carol"})


def test_import_makes_one_record_per_row_with_graphrags_ids_and_text_units(
    tmp_path: Path,
) -> None:
    imported = import_graphrag(_folder(tmp_path))
    first = imported.relations[0]
    assert first == {
        "relation_id": "r-a",
        "chunk_id": "tu-1",
        "document_id": "doc-carol",
        "source_entity_id": "e-scrooge",
        "target_entity_id": "e-marley",
        "source_entity_name": SCROOGE,
        "target_entity_name": MARLEY,
        "type": "related",
        "name": "related",
        "description": PARTNERS,
        "attributes": {},
        "source_chunk_ids": ["tu-1", "tu-2"],
    }
    assert [r["relation_id"] for r in imported.relations] == ["r-a", "r-b", "r-c", "r-d", "r-e"]
    cratchit = imported.relations[4]
    assert cratchit["source_entity_id"] == synthetic_entity_id("BOB CRATCHIT")
    assert imported.counts["endpoints_missing_from_entities"] == 1
    assert imported.entities[0] == {
        "entity_id": "e-scrooge",
        "name": SCROOGE,
        "type": "PERSON",
        "profile": "A miser who learns generosity.",
    }


def _undirected(tmp_path: Path) -> Path:
    """A config that declares GraphRAG's unnamed relations symmetric: without it their
    direction is unknown, for an LLM (or a person) to judge."""
    config = tmp_path / "undirected.toml"
    config.write_text('symmetric_relations = ["related"]\n', encoding="utf-8")
    return config


def _pipeline(tmp_path: Path, source: Path) -> tuple[Path, Path, str]:
    work, target = tmp_path / "work", tmp_path / "dedup"
    code, text = cli("import", "graphrag", str(source), "--output", str(work))
    assert code == 0, text
    code, run_text = cli(
        "run",
        str(work / "relations.jsonl"),
        "--config",
        str(_undirected(tmp_path)),
        "--entities",
        str(work / "entities.jsonl"),
        "--output",
        str(work / "run"),
        "--embedding",
        "hash",
        "-q",
    )
    assert code == 0, run_text
    code, export_text = cli(
        "export", "graphrag", str(work / "run"), "--original", str(source), "--to", str(target)
    )
    assert code == 0, export_text
    return work, target, text + export_text


def _check_nothing_lost(source: Path, target: Path) -> dict[str, Any]:
    """Every original row's text units are in the row its id now maps to, and every
    exported row keeps the ids of the original row it stands for."""
    summary: dict[str, Any] = orjson.loads((target / "relmerge_export.json").read_bytes())
    rows = {row["id"]: row for row in read_rows(target / "relationships.parquet")}
    originals = {row["id"]: row for row in read_rows(source / "relationships.parquet")}
    for original in originals.values():
        kept = rows[summary["relationship_id_mapping"][original["id"]]]
        assert set(original["text_unit_ids"]) <= set(kept["text_unit_ids"])
        assert {kept["source"], kept["target"]} == {original["source"], original["target"]}
    for rid, row in rows.items():
        assert row["human_readable_id"] == originals[rid]["human_readable_id"]
    return summary


def test_import_run_export_merges_the_reversed_duplicate_and_keeps_the_rest(
    tmp_path: Path,
) -> None:
    source = _folder(tmp_path)
    work, target, text = _pipeline(tmp_path, source)
    assert "relmerge run" in text and "relmerge export graphrag" in text  # the next commands
    assert "Wrote 4 relationships (5 before, 1 merged row)" in text

    rows = read_rows(target / "relationships.parquet")
    originals = read_rows(source / "relationships.parquet")
    assert [row["id"] for row in rows] == ["r-a", "r-b", "r-d", "r-e"]
    merged = rows[0]
    assert (merged["source"], merged["target"], merged["description"]) == (
        SCROOGE,
        MARLEY,
        PARTNERS,
    )
    assert merged["weight"] == 8.0
    assert merged["text_unit_ids"] == ["tu-1", "tu-2", "tu-3"]
    assert merged["combined_degree"] == originals[0]["combined_degree"]
    for row, original in zip(rows[1:], [originals[1], originals[3], originals[4]], strict=True):
        assert row == {**original, "human_readable_id": row["human_readable_id"]}
    schema = pq.read_schema(target / "relationships.parquet")
    assert schema.equals(pq.read_schema(source / "relationships.parquet"))
    pandas_index = orjson.loads(schema.metadata[b"pandas"])["index_columns"][0]
    assert pandas_index["stop"] == 4  # pandas would refuse a RangeIndex of the old length
    summary = _check_nothing_lost(source, target)
    assert summary["relationship_id_mapping"]["r-c"] == "r-a"

    # entities unchanged; text units point at the surviving row, without repeats
    assert (target / "entities.parquet").read_bytes() == (source / "entities.parquet").read_bytes()
    units = {row["id"]: row["relationship_ids"] for row in read_rows(target / "text_units.parquet")}
    assert units["tu-2"] == ["r-a"]  # was ["r-a", "r-c"]
    assert units["tu-3"] == ["r-a"]
    rejected = (work / "run" / "rejected.jsonl").read_bytes()
    assert b"r-e" in rejected  # kept in the export as it was, above


def test_export_refuses_to_write_over_the_original_or_a_foreign_run(tmp_path: Path) -> None:
    source = _folder(tmp_path)
    work, target, _ = _pipeline(tmp_path, source)
    run = str(work / "run")
    code, text = cli("export", "graphrag", run, "--original", str(source), "--to", str(source))
    assert code == 2 and "original folder" in text
    code, text = cli("export", "graphrag", run, "--original", str(source), "--to", str(target))
    assert code == 2 and "not empty" in text and "--overwrite" in text
    code, text = cli(
        "export", "graphrag", run, "--original", str(source), "--to", str(target), "--overwrite"
    )
    assert code == 0, text

    other = write_graphrag(
        tmp_path / "other",
        [relationship("x-1", SCROOGE, FRED, "Another graph.", ["tu-9"], 1.0)],
        [],
    )
    code, text = cli(
        "export", "graphrag", run, "--original", str(other), "--to", str(tmp_path / "t"), "-q"
    )
    assert code == 2 and "does not come from this original" in text
    assert len(text.strip().splitlines()) == 1
    code, text = cli("export", "graphrag", str(work), "--original", str(source), "--to", "t2")
    assert code == 2 and "no finished relmerge run" in text


def test_older_graphrag_names_and_a_bad_table(tmp_path: Path) -> None:
    """``create_final_*`` tables (GraphRAG 0.x, entities keyed by ``name``) are read too."""
    old = tmp_path / "old"
    old.mkdir()
    pq.write_table(
        pa.Table.from_pylist(
            [
                {
                    "source": "A",
                    "target": "B",
                    "weight": 1.0,
                    "description": "A knows B.",
                    "text_unit_ids": ["t1"],
                    "id": "u1",
                }
            ]
        ),
        old / "create_final_relationships.parquet",
    )
    pq.write_table(
        pa.Table.from_pylist([{"id": "ea", "name": "A", "type": "PERSON", "description": "a"}]),
        old / "create_final_entities.parquet",
    )
    imported = import_graphrag(old)
    assert imported.relations[0]["source_entity_id"] == "ea"
    assert imported.relations[0]["document_id"] == "unknown"

    bad = tmp_path / "bad"
    bad.mkdir()
    pq.write_table(pa.Table.from_pylist([{"source": "A"}]), bad / "relationships.parquet")
    code, text = cli("import", "graphrag", str(bad), "--output", str(tmp_path / "w"))
    assert code == 2 and "no column(s) target, description, text_unit_ids" in text
    code, text = cli("import", "graphrag", str(tmp_path / "none"), "--output", "w")
    assert code == 2 and "not found" in text


@pytest.mark.skipif(not REAL.is_dir(), reason="shared real data not present")
def test_the_christmas_carol_graph_round_trips_with_nothing_lost(tmp_path: Path) -> None:
    source = graphrag_from_sample(tmp_path / "carol")
    work, target, _ = _pipeline(tmp_path, source)
    assert len(import_graphrag(source).relations) == 978
    summary = _check_nothing_lost(source, target)
    assert summary["relationships_before"] == 978
    assert summary["relationships_after"] < 978 and summary["merged_rows"] > 0
    result = orjson.loads((work / "run" / "deduplicate_relations_result.json").read_bytes())
    assert result["output_relation_count"] == summary["relationships_after"]


def test_an_entity_mapping_merges_rows_of_alias_endpoints(tmp_path: Path) -> None:
    """Scrooge → Marley and Marley → Ebenezer Scrooge, the alias mapped to Scrooge: one row,
    in the direction of the run's output, with both rows' weight and text units."""
    source = write_graphrag(
        tmp_path / "output",
        [
            relationship("r-1", "SCROOGE", MARLEY, PARTNERS, ["tu-1"], 2.0),
            relationship("r-2", MARLEY, SCROOGE, PARTNERS, ["tu-2"], 3.0),
        ],
        [
            entity("e-short", "SCROOGE", "PERSON", "A miser."),
            entity("e-long", SCROOGE, "PERSON", "The same miser."),
            entity("e-marley", MARLEY, "PERSON", "His partner."),
        ],
    )
    mapping = tmp_path / "entity_id_mapping.json"
    mapping.write_bytes(orjson.dumps({"e-long": "e-short"}))
    work, target = tmp_path / "work", tmp_path / "dedup"
    assert cli("import", "graphrag", str(source), "--output", str(work))[0] == 0
    code, text = cli(
        "run",
        str(work / "relations.jsonl"),
        "--entity-mapping",
        str(mapping),
        "--config",
        str(_undirected(tmp_path)),
        "--output",
        str(work / "run"),
        "--embedding",
        "hash",
        "-q",
    )
    assert code == 0, text
    code, text = cli(
        "export", "graphrag", str(work / "run"), "--original", str(source), "--to", str(target)
    )
    assert code == 0, text
    [row] = read_rows(target / "relationships.parquet")
    assert (row["id"], row["source"], row["target"]) == ("r-1", "SCROOGE", MARLEY)
    assert (row["weight"], row["text_unit_ids"]) == (5.0, ["tu-1", "tu-2"])
    units = {
        unit["id"]: unit["relationship_ids"] for unit in read_rows(target / "text_units.parquet")
    }
    assert units == {"tu-1": ["r-1"], "tu-2": ["r-1"]}
