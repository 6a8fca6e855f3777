"""Every GraphRAG generation in ../shared/data/upstream: import → run → export → import.

After the export, every kept row keeps its ``id`` and ``human_readable_id`` (in the
column's own type), every citation in the community reports still points at the row
that holds the facts of the row it cited, no citation names an id twice where it was
rewritten, every ``relationship_ids`` entry names a row, and the export imports again
as the run's output.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from relmerge.adapters.graphrag import REPORT_COLUMNS, import_graphrag, locate
from relmerge.adapters.tables import Table, read_table
from tests.adapters.fixtures import cli
from tests.adapters.upstream import UPSTREAM, import_run, needs_upstream

GRAPHRAG = UPSTREAM / "graphrag"
CITATION = re.compile(r"Relationships?\s*\(([^()\[\]]*)\)", re.I)
SOURCES = [
    ("v3-tests-verbs", "v3-tests-verbs"),
    ("v3-tests-verbs/relationships.csv", "v3-tests-verbs"),
    ("v3-operation-dulce", "v3-operation-dulce"),
    ("v1-2025-01-operation-dulce", "v1-2025-01-operation-dulce"),
    ("v0.1-2024-07-operation-dulce", "v0.1-2024-07-operation-dulce"),
]


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [text for item in value for text in _texts(item)]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _texts(item)]
    return []


def _citations(table: Table, row: dict[str, Any]) -> list[list[str]]:
    return [
        [item.strip() for item in match.split(",")]
        for column in REPORT_COLUMNS
        for text in _texts(row.get(column))
        for match in CITATION.findall(text)
    ]


def _check_citations(folder: Path, target: Path, kept_readable: dict[str, str]) -> int:
    """Each cited row's facts are in the row its citation names now; returns how many
    citations changed."""
    changed = 0
    for name in ("community_reports.parquet", "create_final_community_reports.parquet"):
        if not (folder / name).is_file():
            continue
        before, after = read_table(folder / name), read_table(target / name)
        assert len(before.rows) == len(after.rows)
        for old_row, new_row in zip(before.rows, after.rows, strict=True):
            old_cites, new_cites = _citations(before, old_row), _citations(after, new_row)
            assert len(old_cites) == len(new_cites)
            for old, new in zip(old_cites, new_cites, strict=True):
                if old == new:
                    assert not any(item in kept_readable for item in old if item.isdigit())
                    continue
                changed += 1
                numbers = [item for item in new if item.isdigit()]
                assert len(numbers) == len(set(numbers)), new  # no id twice
                for item in old:
                    expected = kept_readable.get(item, item) if item.isdigit() else item
                    assert expected in new, (old, new)
    return changed


@needs_upstream
@pytest.mark.parametrize(("source_name", "folder_name"), SOURCES)
def test_graphrag_folder_round_trips_with_ids_and_citations_kept(
    tmp_path: Path, source_name: str, folder_name: str
) -> None:
    source, folder = GRAPHRAG / source_name, GRAPHRAG / folder_name
    work, target = tmp_path / "work", tmp_path / "dedup"
    result, id_mapping = import_run("graphrag", source, work)
    code, text = cli(
        "export", "graphrag", str(work / "run"), "--original", str(source), "--to", str(target)
    )
    assert code == 0, text
    summary = orjson.loads((target / "relmerge_export.json").read_bytes())
    located = locate(source)
    name = located.relationships.name
    before, after = read_table(located.relationships), read_table(target / name)
    assert located.format == ("csv" if source_name.endswith(".csv") else "parquet")
    assert after.format == before.format and after.columns == before.columns
    if before.format == "parquet":
        assert after.schema.equals(before.schema, check_metadata=False)

    # merges happened, and the exported table holds one row per output (repeats kept)
    assert summary["merged_rows"] > 0
    outputs = result["output_relation_count"] + result["rejected_count"]
    assert summary["relationships_after"] == outputs
    first_rows = {row["id"]: row for row in reversed(before.rows)}
    new_rows = {row["id"]: row for row in after.rows}
    repeats = len(before.rows) // len(first_rows)
    assert len(after.rows) == repeats * len(new_rows)

    # kept rows keep id and human_readable_id; untouched rows are as they were
    members: dict[str, list[str]] = {}
    for rid, output in id_mapping.items():
        members.setdefault(output, []).append(rid)
    kept_of: dict[str, str] = {}  # original row id -> id of the exported row holding it
    for output, ids in members.items():
        holders = [rid for rid in ids if rid in new_rows]
        assert len(holders) == 1, (output, ids)
        for rid in ids:
            kept_of[rid] = holders[0]
    for rid, row in new_rows.items():
        original = first_rows[rid]
        assert row["human_readable_id"] == original["human_readable_id"]
        if len(members.get(id_mapping.get(rid, ""), [rid])) == 1:
            assert row == original
    for rid, original in first_rows.items():
        kept = new_rows[kept_of.get(rid, rid)]
        assert set(after.items(kept, "text_unit_ids") or []) >= set(
            before.items(original, "text_unit_ids") or []
        )
    readable = {
        str(first_rows[rid]["human_readable_id"]).strip(): str(
            new_rows[kept]["human_readable_id"]
        ).strip()
        for rid, kept in kept_of.items()
        if rid != kept
    }
    assert summary["human_readable_id_mapping"] == readable

    # citations follow the facts; relationship_ids name rows that exist
    changed = _check_citations(folder, target, readable)
    assert changed == summary["citations_rewritten"]
    assert changed > 0
    content = {
        r["report_id"] for r in summary["citation_rewrites"] if r["column"] == "full_content"
    }
    embedded = "embeddings.community_full_content.parquet"
    expected = {embedded: sorted(content)} if (folder / embedded).is_file() and content else {}
    assert summary["stale"] == expected
    for path in sorted(target.glob("*.parquet")) + sorted(target.glob("*.csv")):
        table = read_table(path)
        if "relationship_ids" in table.columns:
            for row in table.rows:
                assert set(table.items(row, "relationship_ids") or []) <= set(new_rows)

    # the export imports again: one record per output (and per rejected row)
    again = import_graphrag(target / name if source.is_file() else target)
    assert len(again.relations) == outputs
