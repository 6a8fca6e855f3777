"""Small GraphRAG and LightRAG / nano-graphrag output folders, written as those tools do.

The column lists and GraphML layout follow the originals described by the converters in
``../shared/data/real/``; the ``*_from_sample`` builders rebuild whole originals from the
converted samples there (records + provenance), for the tests that run on real data.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped, unused-ignore]
from click.testing import CliRunner

from relmerge.cli import main

REAL = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "real"
GRAPHML_NS = "http://graphml.graphdrawing.org/xmlns"
SEP = "<SEP>"

RELATIONSHIPS_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("human_readable_id", pa.int64()),
        ("source", pa.string()),
        ("target", pa.string()),
        ("description", pa.string()),
        ("weight", pa.float64()),
        ("combined_degree", pa.int64()),
        ("text_unit_ids", pa.list_(pa.string())),
    ]
)
ENTITIES_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("human_readable_id", pa.int64()),
        ("title", pa.string()),
        ("type", pa.string()),
        ("description", pa.string()),
        ("text_unit_ids", pa.list_(pa.string())),
        ("frequency", pa.int64()),
        ("degree", pa.int64()),
    ]
)
TEXT_UNITS_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("human_readable_id", pa.int64()),
        ("text", pa.string()),
        ("n_tokens", pa.int64()),
        ("document_id", pa.string()),
        ("entity_ids", pa.list_(pa.string())),
        ("relationship_ids", pa.list_(pa.string())),
    ]
)


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def relationship(
    rid: str, source: str, target: str, description: str, units: Sequence[str], weight: float
) -> dict[str, Any]:
    return {
        "id": rid,
        "human_readable_id": 0,
        "source": source,
        "target": target,
        "description": description,
        "weight": weight,
        "combined_degree": 5,
        "text_unit_ids": list(units),
    }


def entity(eid: str, title: str, kind: str, description: str) -> dict[str, Any]:
    return {
        "id": eid,
        "human_readable_id": 0,
        "title": title,
        "type": kind,
        "description": description,
        "text_unit_ids": ["tu-1"],
        "frequency": 1,
        "degree": 1,
    }


def write_graphrag(
    folder: Path,
    relationships: list[dict[str, Any]],
    entities: list[dict[str, Any]],
    documents: dict[str, str] | None = None,
) -> Path:
    """relationships / entities / text_units (relationship_ids included) as GraphRAG 2+."""
    folder.mkdir(parents=True, exist_ok=True)
    for number, row in enumerate(relationships):
        row["human_readable_id"] = number
    for number, row in enumerate(entities):
        row["human_readable_id"] = number
    # GraphRAG writes its tables with pandas, which records its RangeIndex in the schema
    index = {"kind": "range", "name": None, "start": 0, "stop": len(relationships), "step": 1}
    pandas = {"index_columns": [index], "columns": [], "pandas_version": "2.2.3"}
    schema = RELATIONSHIPS_SCHEMA.with_metadata({b"pandas": orjson.dumps(pandas)})
    pq.write_table(pa.Table.from_pylist(relationships, schema), folder / "relationships.parquet")
    pq.write_table(pa.Table.from_pylist(entities, ENTITIES_SCHEMA), folder / "entities.parquet")
    units: dict[str, list[str]] = {}
    for row in relationships:
        for unit in row["text_unit_ids"]:
            units.setdefault(unit, []).append(row["id"])
    documents = documents or {}
    text_units = [
        {
            "id": unit,
            "human_readable_id": number,
            "text": f"text of {unit}",
            "n_tokens": 300,
            "document_id": documents.get(unit, "doc-1"),
            "entity_ids": [],
            "relationship_ids": ids,
        }
        for number, (unit, ids) in enumerate(units.items())
    ]
    pq.write_table(
        pa.Table.from_pylist(text_units, TEXT_UNITS_SCHEMA), folder / "text_units.parquet"
    )
    return folder


def read_rows(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    return rows


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def graphrag_from_sample(folder: Path) -> Path:
    """The GraphRAG Christmas Carol tables rebuilt from the converted sample."""
    sample = REAL / "graphrag-christmas-carol"
    provenance = {p["relation_id"]: p for p in _jsonl(sample / "provenance.jsonl")}
    relationships, entities, documents = [], {}, {}
    for record in _jsonl(sample / "relations.jsonl"):
        extra = provenance[record["relation_id"]]
        row = relationship(
            extra["original_relation_id"],
            record["source_entity_name"],
            record["target_entity_name"],
            record["description"],
            record["source_chunk_ids"],
            extra["weight"],
        )
        row["combined_degree"] = extra["combined_degree"]
        relationships.append(row)
        documents[record["chunk_id"]] = record["document_id"]
        for side in ("source", "target"):
            if extra["entity_id_synthesized"] and record[f"{side}_entity_id"].startswith("synth-"):
                continue
            kind = record["attributes"].get(f"{side}_entity_type", "")
            title = record[f"{side}_entity_name"]
            entities[title] = entity(record[f"{side}_entity_id"], title, kind, f"{title}.")
    return write_graphrag(folder, relationships, list(entities.values()), documents)


def write_graphml(
    path: Path,
    nodes: dict[str, dict[str, str]],
    edges: list[tuple[str, str, dict[str, str]]],
    edge_keys: Sequence[str] = ("weight", "description", "source_id", "order"),
) -> Path:
    """A GraphML file laid out as networkx writes LightRAG / nano-graphrag graphs."""
    ET.register_namespace("", GRAPHML_NS)
    root = ET.Element(f"{{{GRAPHML_NS}}}graphml")
    key_ids: dict[tuple[str, str], str] = {}
    node_keys = ("entity_type", "description", "source_id")
    for kind, names in (("node", node_keys), ("edge", edge_keys)):
        for name in names:
            key_id = f"d{len(key_ids)}"
            key_ids[(kind, name)] = key_id
            kind_type = "double" if name == "weight" else "long" if name == "order" else "string"
            ET.SubElement(
                root,
                f"{{{GRAPHML_NS}}}key",
                {"id": key_id, "for": kind, "attr.name": name, "attr.type": kind_type},
            )
    graph = ET.SubElement(root, f"{{{GRAPHML_NS}}}graph", {"edgedefault": "undirected"})
    for node_id, data in nodes.items():
        node = ET.SubElement(graph, f"{{{GRAPHML_NS}}}node", {"id": node_id})
        for name, value in data.items():
            ET.SubElement(
                node, f"{{{GRAPHML_NS}}}data", {"key": key_ids[("node", name)]}
            ).text = value
    for source, target, data in edges:
        edge = ET.SubElement(graph, f"{{{GRAPHML_NS}}}edge", {"source": source, "target": target})
        for name, value in data.items():
            ET.SubElement(
                edge, f"{{{GRAPHML_NS}}}data", {"key": key_ids[("edge", name)]}
            ).text = value
    ET.indent(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    return path


def read_graphml_edges(path: Path) -> list[tuple[str, str, dict[str, str]]]:
    """(source, target, data by attribute name) of every edge, in file order."""
    root = ET.parse(path).getroot()
    ns = f"{{{GRAPHML_NS}}}"
    names = {key.get("id"): key.get("attr.name") for key in root.iter(f"{ns}key")}
    return [
        (
            edge.get("source", ""),
            edge.get("target", ""),
            {str(names[d.get("key")]): d.text or "" for d in edge.findall(f"{ns}data")},
        )
        for edge in root.iter(f"{ns}edge")
    ]


def read_graphml_nodes(path: Path) -> dict[str, dict[str, str]]:
    root = ET.parse(path).getroot()
    ns = f"{{{GRAPHML_NS}}}"
    names = {key.get("id"): key.get("attr.name") for key in root.iter(f"{ns}key")}
    return {
        node.get("id", ""): {
            str(names[d.get("key")]): d.text or "" for d in node.findall(f"{ns}data")
        }
        for node in root.iter(f"{ns}node")
    }


def nano_from_sample(folder: Path, name: str = "nanographrag-christmas-carol") -> Path:
    """A nano-graphrag working folder rebuilt from a converted sample: quoted node ids,
    one edge per original edge with its descriptions joined by <SEP>, a chunk store."""
    sample = REAL / name
    provenance = {p["relation_id"]: p for p in _jsonl(sample / "provenance.jsonl")}
    edges: dict[str, tuple[str, str, list[str], dict[str, Any]]] = {}
    nodes: dict[str, dict[str, str]] = {}
    chunks: dict[str, dict[str, str]] = {}
    for record in _jsonl(sample / "relations.jsonl"):
        extra = provenance[record["relation_id"]]
        ends = []
        for side in ("source", "target"):
            node_id = f'"{record[f"{side}_entity_name"]}"'
            kind = record["attributes"].get(f"{side}_entity_type", "")
            nodes.setdefault(
                node_id,
                {
                    "entity_type": f'"{kind}"',
                    "description": f'"{record[f"{side}_entity_name"]}"',
                    "source_id": record["chunk_id"],
                },
            )
            ends.append(node_id)
        edge = edges.setdefault(extra["edge_id"], (ends[0], ends[1], [], extra))
        edge[2].append(record["description"])
        chunks[record["chunk_id"]] = {"content": "", "full_doc_id": record["document_id"]}
    graph_edges = [
        (
            source,
            target,
            {
                "weight": str(extra["weight"]),
                "description": SEP.join(descriptions),
                "source_id": SEP.join(extra["edge_source_chunk_ids"]),
                "order": str(extra.get("order", 1)),
            },
        )
        for source, target, descriptions, extra in edges.values()
    ]
    write_graphml(folder / "graph_chunk_entity_relation.graphml", nodes, graph_edges)
    (folder / "kv_store_text_chunks.json").write_bytes(orjson.dumps(chunks))
    return folder
