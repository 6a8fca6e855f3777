"""A pass over a real LightRAG on its default file storages: merge, keep, re-embed, undo."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightrag")

from lightrag import QueryParam

from relmerge.config import DeduplicateRelationsConfig
from relmerge.integrations.lightrag import deduplicate, undo
from tests.integrations.lightrag.support import Fact, Script, edges, insert, make_rag

FRIENDS = [
    ("doc-a", "Alice met Bob at school.", "Alice is a friend of Bob"),
    ("doc-b", "Alice and Bob play together.", "Alice is a friend of Bob."),
    ("doc-c", "Alice lent Bob a book.", "Alice lent Bob a book in 1998"),
    ("doc-d", "Bob returned it in 2001.", "Alice lent Bob a book in 2001"),
]


def script() -> Script:
    found = Script()
    for _, text, description in FRIENDS:
        found.facts[text] = [Fact("Alice", "Bob", "friendship", description)]
    return found


async def _built(folder: Path, given: Script) -> Any:
    rag = make_rag(folder, given)
    await rag.initialize_storages()
    for doc_id, text, _ in FRIENDS:
        await insert(rag, {doc_id: text})
    return rag


def test_a_pass_merges_repeats_keeps_facts_and_undo_restores(tmp_path: Path) -> None:
    async def scenario() -> None:
        given = script()
        rag = await _built(tmp_path / "rag", given)
        before = await edges(rag)
        edge = before[("Alice", "Bob")]
        assert edge["description"].count("<SEP>") == 3
        given.embedded.clear()
        done = await deduplicate(
            rag, output=tmp_path / "out", config=DeduplicateRelationsConfig(semantic_merge=False)
        )
        after = (await edges(rag))[("Alice", "Bob")]
        parts = after["description"].split("<SEP>")
        # the two wordings of one fact are one fragment; 1998 and 2001 stay apart
        assert len(parts) == 3
        assert sum("1998" in p for p in parts) == 1 and sum("2001" in p for p in parts) == 1
        assert after["source_id"] == edge["source_id"] and float(after["weight"]) == float(
            edge["weight"]
        )
        assert done.edges_read == 1 and done.edges_changed == 1
        assert done.fragments_before == 4 and done.fragments_after == 3
        assert any("Alice\tBob" in text for text in given.embedded)  # re-embedded
        data = await rag.aquery_data("Alice", QueryParam(mode="local"))
        found = [r["description"] for r in data["data"]["relationships"]]
        assert found == [after["description"]]
        taken = await undo(rag, tmp_path / "out")
        assert taken.restored == 1 and taken.rebased == 0
        restored = (await edges(rag))[("Alice", "Bob")]
        for name in ("description", "keywords", "source_id", "file_path"):
            assert restored[name] == edge[name]
        assert float(restored["weight"]) == float(edge["weight"])
        await rag.finalize_storages()

    asyncio.run(scenario())
