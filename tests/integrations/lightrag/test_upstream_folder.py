"""The LightRAG folders in ../shared/data/upstream: import → run → export → import, and
LightRAG itself (``lightrag-hku``) reads the export.

LightRAG is read offline: its NetworkX graph storage, JSON KV storages and NanoVectorDB
storage are opened through a ``LightRAG`` instance built with a character tokenizer
(the default one would fetch tiktoken's encoding) and a hash embedder of the folder's
dimension; nothing is downloaded.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from relmerge.integrations.lightrag.folder import GRAPH_FILE, SEP, entity_id, import_lightrag
from relmerge.integrations.lightrag.folder_stores import pair_of, vector_id
from tests.adapters.fixtures import cli, read_graphml_edges, read_graphml_nodes
from tests.adapters.upstream import UPSTREAM, import_run, jsonl, needs_upstream

LIGHTRAG = UPSTREAM / "lightrag"
PIPELINE = LIGHTRAG / "lightrag-hku-1.5.7-pipeline"


def _needs_lightrag() -> None:
    """lightrag-hku is in the dev extra the test command installs: never skipped in CI."""
    if not os.environ.get("CI"):
        pytest.importorskip("lightrag")


class _Characters:
    """A tokenizer model of one token per character: offline, unlike tiktoken."""

    def encode(self, content: str) -> list[int]:
        return [ord(c) for c in content]

    def decode(self, tokens: Sequence[int]) -> str:
        return "".join(chr(t) for t in tokens)


async def _no_llm(prompt: str, **_: Any) -> str:
    return ""


def _dimension(folder: Path) -> int:
    path = folder / "vdb_relationships.json"
    return int(orjson.loads(path.read_bytes())["embedding_dim"]) if path.is_file() else 16


async def _open(folder: Path) -> Any:
    from lightrag import LightRAG
    from lightrag.utils import EmbeddingFunc, Tokenizer

    dimension = _dimension(folder)

    async def embed(texts: list[str]) -> np.ndarray[Any, Any]:
        return np.array(
            [
                np.frombuffer(hashlib.sha256(t.encode()).digest(), np.uint8)[:dimension]
                for t in texts
            ],
            dtype=np.float32,
        )

    rag = LightRAG(
        working_dir=str(folder),
        llm_model_func=_no_llm,
        embedding_func=EmbeddingFunc(embedding_dim=dimension, max_token_size=8192, func=embed),
        tokenizer=Tokenizer("characters", _Characters()),
    )
    await rag.initialize_storages()
    return rag


def _export(tmp_path: Path, source: Path, pairs: int) -> tuple[Path, Path, dict[str, Any], str]:
    work, target = tmp_path / "work", tmp_path / "dedup"
    import_run("lightrag", source, work, pairs)
    code, text = cli(
        "export", "lightrag", str(work / "run"), "--original", str(source), "--to", str(target)
    )
    assert code == 0, text
    return work, target, orjson.loads((target / "relmerge_export.json").read_bytes()), text


@needs_upstream
@pytest.mark.parametrize("name", ["home-lab-agentic-ai", "lightrag-hku-1.5.7-pipeline"])
def test_lightrag_folder_round_trips_and_lightrag_reads_it(tmp_path: Path, name: str) -> None:
    _needs_lightrag()
    source = LIGHTRAG / name
    work, target, summary, _ = _export(tmp_path, source, pairs=0)
    records = jsonl(work / "relations.jsonl")
    keywords = {
        frozenset((entity_id(s), entity_id(t))): data.get("keywords") or "related"
        for s, t, data in read_graphml_edges(source / GRAPH_FILE)
    }
    for record in records:  # the edge's keywords are the relation's name
        pair = frozenset((record["source_entity_id"], record["target_entity_id"]))
        assert record["name"] == keywords[pair]
    result = orjson.loads((work / "run" / "deduplicate_relations_result.json").read_bytes())
    assert result["semantic_merge_count"] + result["exact_merge_count"] > 0
    assert summary["edges_rewritten"] > 0
    assert read_graphml_nodes(target / GRAPH_FILE) == read_graphml_nodes(source / GRAPH_FILE)
    again = import_lightrag(target)
    assert len(again.relations) == result["output_relation_count"] + result["rejected_count"]

    async def read() -> list[dict[str, Any]]:
        rag = await _open(shutil.copytree(target, tmp_path / "read"))
        try:
            edges: list[dict[str, Any]] = await rag.chunk_entity_relation_graph.get_all_edges()
        finally:
            await rag.finalize_storages()
        return edges

    edges = asyncio.run(read())
    exported = read_graphml_edges(target / GRAPH_FILE)
    assert len(edges) == len(exported) == summary["edges_after"]
    by_pair = {frozenset((e["source"], e["target"])): e for e in edges}
    for source_id, target_id, data in exported:
        assert by_pair[frozenset((source_id, target_id))]["description"] == data["description"]


@needs_upstream
def test_lightrag_stores_follow_the_graph_or_are_reported_stale(tmp_path: Path) -> None:
    """Cratchit folded into Marley: the Cratchit–Scrooge edge joins Marley–Scrooge. Its
    chunk list, document pairs and vector row go; the changed edge's vector is stale,
    and the call the export prints re-embeds it."""
    _needs_lightrag()
    work, target, summary, text = _export(tmp_path, PIPELINE, pairs=1)
    mapping = orjson.loads((work / "entity_mapping.json").read_bytes())
    assert len(mapping) == 1
    assert summary["edges_removed"] == 1 and summary["edges_after"] == 1
    [(kept_source, kept_target, data)] = read_graphml_edges(target / GRAPH_FILE)
    kept = pair_of(kept_source, kept_target)
    chunks = orjson.loads((target / "kv_store_relation_chunks.json").read_bytes())
    assert list(chunks) == [SEP.join(kept)]
    assert set(chunks[SEP.join(kept)]["chunk_ids"]) == set(data["source_id"].split(SEP))
    documents = orjson.loads((target / "kv_store_full_relations.json").read_bytes())
    for entry in documents.values():
        assert entry["relation_pairs"] == [list(kept)] and entry["count"] == 1
    vectors = orjson.loads((target / "vdb_relationships.json").read_bytes())
    assert [row["__id__"] for row in vectors["data"]] == [vector_id(kept)]
    assert sorted(summary["stores_updated"]) == [
        "kv_store_full_relations.json",
        "kv_store_relation_chunks.json",
        "vdb_relationships.json",
    ]
    stale = summary["stale"]["vdb_relationships.json"]
    assert [(e["source"], e["target"]) for e in stale] == [tuple(kept)]
    assert "Stale:" in text and "aedit_relation" in text

    async def rebuild() -> tuple[dict[str, Any] | None, dict[str, Any] | None, Any]:
        rag = await _open(target)
        try:
            before = await rag.relationships_vdb.get_by_id(vector_id(kept))
            export = summary
            for edge in export["stale"]["vdb_relationships.json"]:  # as the hint says
                await rag.aedit_relation(edge["source"], edge["target"], {})
            after = await rag.relationships_vdb.get_by_id(vector_id(kept))
            chunk_row = await rag.relation_chunks.get_by_id(SEP.join(kept))
        finally:
            await rag.finalize_storages()
        return before, after, chunk_row

    before, after, chunk_row = asyncio.run(rebuild())
    assert before is not None and after is not None and chunk_row is not None
    assert data["description"] not in before["content"]  # the stale row: the old text
    assert data["description"] in after["content"]
    assert set(chunk_row["chunk_ids"]) == set(data["source_id"].split(SEP))
