"""Read a GraphRAG output folder with GraphRAG's own loaders; print what they read (JSON).

Runs inside a GraphRAG environment (``bench/upstream_roundtrip.py`` makes them), never in
relmerge's: ``python bench/graphrag_read.py FOLDER GENERATION FORMAT``. GENERATION 3 uses
GraphRAG 3.x's ``DataReader`` over its Parquet or CSV table provider (what ``graphrag
query`` loads); 1 and 0.1 use GraphRAG 1.x's query loaders on the ``create_final_*``
tables (0.1 tables name the relationship rank ``rank``, as GraphRAG 0.x's own loader read
it). Every table then goes through ``graphrag.query.indexer_adapters``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd  # type: ignore[import-untyped, unused-ignore]


def _rows(relationships: list[Any], reports: list[Any], units: list[Any]) -> dict[str, Any]:
    return {
        "relationships": [
            {
                "id": r.id,
                "short_id": r.short_id,
                "source": r.source,
                "target": r.target,
                "text_unit_ids": list(r.text_unit_ids or []),
            }
            for r in relationships
        ],
        "reports": [{"id": r.id, "full_content": r.full_content} for r in reports],
        "text_units": [
            {"id": u.id, "relationship_ids": list(u.relationship_ids or [])} for u in units
        ],
    }


async def _read_v3(folder: Path, table_format: str) -> dict[str, Any]:
    from graphrag.data_model.data_reader import DataReader
    from graphrag.query.indexer_adapters import (
        read_indexer_communities,
        read_indexer_covariates,
        read_indexer_entities,
        read_indexer_relationships,
        read_indexer_reports,
        read_indexer_text_units,
    )
    from graphrag_storage.file_storage import FileStorage
    from graphrag_storage.tables.csv_table_provider import CSVTableProvider
    from graphrag_storage.tables.parquet_table_provider import ParquetTableProvider

    storage = FileStorage(base_dir=str(folder))
    parquet = DataReader(ParquetTableProvider(storage))
    main = DataReader(CSVTableProvider(storage)) if table_format == "csv" else parquet
    relationships = read_indexer_relationships(await main.relationships())
    units = read_indexer_text_units(await main.text_units())
    communities = await parquet.communities()  # the CSV test tables have none of their own
    reports_df = await parquet.community_reports()
    entities = read_indexer_entities(await main.entities(), communities.copy(), None)
    reports = read_indexer_reports(reports_df.copy(), communities.copy(), None)
    covariates = read_indexer_covariates(await main.covariates())
    read_indexer_communities(communities, reports_df)
    return {
        "loader": f"graphrag {metadata.version('graphrag')} DataReader ({table_format}) "
        "+ query.indexer_adapters",
        "entities": len(entities),
        "covariates": len(covariates),
        **_rows(relationships, reports, units),
    }


def _read_v1(folder: Path, generation: str) -> dict[str, Any]:
    from graphrag.query.indexer_adapters import (
        read_indexer_covariates,
        read_indexer_entities,
        read_indexer_relationships,
        read_indexer_reports,
        read_indexer_text_units,
    )
    from graphrag.query.input.loaders.dfs import read_relationships

    def table(name: str) -> pd.DataFrame:
        return pd.read_parquet(folder / f"create_final_{name}.parquet")

    nodes = table("nodes")
    if generation == "0.1":
        frame = table("relationships")
        relationships = read_relationships(
            frame, rank_col="rank", description_embedding_col=None, attributes_cols=None
        )
        # 0.1 reports and nodes key communities by text; 1.x loaders expect numbers
        reports_df = table("community_reports").assign(
            community=lambda df: df["community"].astype(int)
        )
        nodes = nodes.assign(community=lambda df: df["community"].astype(float))
        entities_df = table("entities").rename(columns={"name": "title"})
    else:
        relationships = read_indexer_relationships(table("relationships"))
        reports_df = table("community_reports")
        entities_df = table("entities")
    units = read_indexer_text_units(table("text_units"))
    entities = read_indexer_entities(nodes.copy(), entities_df, None)
    reports = read_indexer_reports(reports_df, nodes.copy(), None)
    covariates = read_indexer_covariates(table("covariates"))
    return {
        "loader": f"graphrag {metadata.version('graphrag')} query.indexer_adapters"
        + (" (0.1 columns: rank)" if generation == "0.1" else ""),
        "entities": len(entities),
        "covariates": len(covariates),
        **_rows(relationships, reports, units),
    }


def main() -> None:
    folder, generation, table_format = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    if generation == "3":
        result = asyncio.run(_read_v3(folder, table_format))
    else:
        result = _read_v1(folder, generation)
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
