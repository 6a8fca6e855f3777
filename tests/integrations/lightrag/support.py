"""LightRAG instances for tests, built with LightRAG's own API (never by writing its files).

A scripted extraction model answers LightRAG's extraction prompt from a table of facts per
document text; a hashing embedder stands for the user's embedding function and counts
what it embeds (so a test sees the re-embedding); the word tokenizer keeps it offline.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from relmerge.integrations.lightrag import offline_tokenizer

D = "<|#|>"
DIM = 32


@dataclass(frozen=True)
class Fact:
    source: str
    target: str
    keywords: str
    description: str


@dataclass
class Script:
    """Extraction answers by document text; the texts embedded so far."""

    facts: dict[str, list[Fact]] = field(default_factory=dict)
    embedded: list[str] = field(default_factory=list)

    async def llm(self, prompt: str, system_prompt: str | None = None, **_: Any) -> str:
        whole = prompt + (system_prompt or "")
        for text, facts in self.facts.items():
            if text in whole:
                return extraction(facts)
        return f"entity{D}Nobody{D}other{D}nothing here\n<|COMPLETE|>"

    async def embed(self, texts: list[str], **_: Any) -> np.ndarray:
        self.embedded.extend(texts)
        rows = []
        for text in texts:
            digest = hashlib.sha256(text.encode()).digest()
            vector = np.frombuffer(digest, dtype=np.uint8)[:DIM].astype(np.float32) + 1.0
            rows.append(vector / np.linalg.norm(vector))
        return np.array(rows)


def extraction(facts: Sequence[Fact]) -> str:
    """LightRAG's extraction answer format: entities, then relations, then the marker."""
    names = sorted({name for fact in facts for name in (fact.source, fact.target)})
    lines = [f"entity{D}{name}{D}person{D}{name} is someone in the story" for name in names]
    lines += [f"relation{D}{f.source}{D}{f.target}{D}{f.keywords}{D}{f.description}" for f in facts]
    return "\n".join(lines) + "\n<|COMPLETE|>"


def make_rag(working_dir: Path, script: Script, **storages: Any) -> Any:
    """A LightRAG on ``working_dir`` with the script's model and embedder."""
    from lightrag import LightRAG
    from lightrag.utils import EmbeddingFunc

    return LightRAG(
        working_dir=str(working_dir),
        llm_model_func=script.llm,
        embedding_func=EmbeddingFunc(embedding_dim=DIM, max_token_size=8192, func=script.embed),
        tokenizer=offline_tokenizer(),
        enable_llm_cache=False,
        **storages,
    )


async def insert(rag: Any, documents: Mapping[str, str]) -> str:
    """Insert documents (id -> text) with ``ainsert``; its track id."""
    ids = list(documents)
    return str(await rag.ainsert([documents[i] for i in ids], ids=ids))


async def edges(rag: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """Every edge by sorted pair, as LightRAG's graph storage gives it."""
    found = {}
    for row in await rag.chunk_entity_relation_graph.get_all_edges():
        pair = tuple(sorted((row["source"], row["target"])))
        found[pair] = {k: v for k, v in row.items() if k not in ("source", "target")}
    return found
