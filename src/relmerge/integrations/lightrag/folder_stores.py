"""LightRAG's relation stores made to agree with an exported graph, or reported stale.

Beside the graph, a LightRAG working folder keeps three stores about its edges:

- ``kv_store_relation_chunks.json``: per edge (``"A<SEP>B"``, names sorted), the chunks
  that state it;
- ``kv_store_full_relations.json``: per document, the entity pairs of its edges;
- ``vdb_relationships.json`` (NanoVectorDB): per edge (``rel-`` + md5 of the sorted
  names), the embedded text ``keywords, names, description`` and its vector.

When an export removes an edge (its facts joined another edge: an entity mapping), its
entries are removed or pointed at the edge that holds its facts now, and the chunk lists
of that edge are joined: no embedder is needed for that. A vector of an edge whose text
changed can only be rebuilt by LightRAG's embedder: those entries stay as they were and
are listed as stale, with the call that re-embeds them (LightRAG's ``aedit_relation``,
which embeds the edge as it now is in the graph).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from relmerge.adapters.common import md5_hex, ordered_union, write_atomic
from relmerge.errors import InputError

RELATION_CHUNKS = "kv_store_relation_chunks.json"
FULL_RELATIONS = "kv_store_full_relations.json"
RELATION_VECTORS = "vdb_relationships.json"
SEP = "<SEP>"
Pair = tuple[str, str]  # node ids, sorted


def pair_of(source: str, target: str) -> Pair:
    first, second = sorted((source, target))
    return first, second


def chunk_key(pair: Pair) -> str:
    return SEP.join(pair)


def vector_id(pair: Pair) -> str:
    return "rel-" + md5_hex(pair[0] + pair[1])


@dataclass
class EdgeChanges:
    """What the graph export did to edges, by sorted node pair."""

    removed: dict[Pair, Pair] = field(default_factory=dict)  # removed edge -> edge holding it
    rewritten: list[Pair] = field(default_factory=list)  # edges whose text changed
    absorbed: dict[Pair, list[Pair]] = field(default_factory=dict)  # edge -> removed edges


@dataclass
class StoreReport:
    updated: list[str] = field(default_factory=list)
    stale: dict[str, list[dict[str, str]]] = field(default_factory=dict)


def _read(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as error:
        raise InputError(f"cannot read {path} as JSON: {error}") from None


def _dump(value: Any) -> bytes:
    # LightRAG writes its stores with json.dump(indent=2, ensure_ascii=False)
    return orjson.dumps(value, option=orjson.OPT_INDENT_2)


def _relation_chunks(store: dict[str, Any], changes: EdgeChanges) -> bool:
    changed = False
    for kept, gone in changes.absorbed.items():
        entries = [store.get(chunk_key(pair)) for pair in (kept, *gone)]
        lists = [
            e["chunk_ids"]
            for e in entries
            if isinstance(e, dict) and isinstance(e.get("chunk_ids"), list)
        ]
        if not lists:
            continue
        chunks = ordered_union(lists)
        entry = dict(store.get(chunk_key(kept)) or {"_id": chunk_key(kept)})
        entry["chunk_ids"], entry["count"] = chunks, len(chunks)
        store[chunk_key(kept)] = entry
        changed = True
    for pair in changes.removed:
        changed = store.pop(chunk_key(pair), None) is not None or changed
    return changed


def _full_relations(store: dict[str, Any], changes: EdgeChanges) -> bool:
    changed = False
    for entry in store.values():
        pairs = entry.get("relation_pairs") if isinstance(entry, dict) else None
        if not isinstance(pairs, list):
            continue
        moved = [
            list(changes.removed.get(pair_of(*p), pair_of(*p)))
            if isinstance(p, list) and len(p) == 2
            else p
            for p in pairs
        ]
        unique = [list(p) for p in dict.fromkeys(tuple(p) for p in moved)]
        if unique != pairs:
            entry["relation_pairs"], entry["count"] = unique, len(unique)
            changed = True
    return changed


def _relation_vectors(
    store: dict[str, Any], changes: EdgeChanges
) -> tuple[bool, list[dict[str, str]]]:
    """Remove the rows of removed edges (and their matrix rows); list rewritten edges."""
    data = store.get("data")
    if not isinstance(data, list):
        return False, []
    removed = {vector_id(pair) for pair in changes.removed} | {
        vector_id((pair[1], pair[0])) for pair in changes.removed
    }
    keep = [
        i
        for i, row in enumerate(data)
        if not (isinstance(row, dict) and row.get("__id__") in removed)
    ]
    changed = len(keep) < len(data)
    if changed:
        dim = int(store.get("embedding_dim") or 0)
        matrix = store.get("matrix")
        if isinstance(matrix, str) and dim:
            rows = np.frombuffer(base64.b64decode(matrix), dtype=np.float32).reshape(-1, dim)
            if len(rows) == len(data):
                store["matrix"] = base64.b64encode(rows[keep].tobytes()).decode()
        store["data"] = [data[i] for i in keep]
    present = {row.get("__id__") for row in store["data"] if isinstance(row, dict)}
    stale = [
        {"source": pair[0], "target": pair[1], "id": vector_id(pair)}
        for pair in changes.rewritten
        if vector_id(pair) in present
    ]
    return changed, stale


def update_stores(original: Path, stage: Path, changes: EdgeChanges) -> StoreReport:
    """Rewrite the copied stores in ``stage`` (read from ``original``) to agree with the
    exported graph; report the vectors only LightRAG's embedder can rebuild."""
    report = StoreReport()
    for name, update in ((RELATION_CHUNKS, _relation_chunks), (FULL_RELATIONS, _full_relations)):
        path = original / name
        if not path.is_file():
            continue
        store = _read(path)
        if isinstance(store, dict) and update(store, changes):
            write_atomic(stage / name, _dump(store))
            report.updated.append(name)
    path = original / RELATION_VECTORS
    if path.is_file():
        store = _read(path)
        if isinstance(store, dict):
            changed, stale = _relation_vectors(store, changes)
            if changed:
                write_atomic(stage / RELATION_VECTORS, _dump(store))
                report.updated.append(RELATION_VECTORS)
            if stale:
                report.stale[RELATION_VECTORS] = stale
    return report


def rebuild_hint(target: Path, stale: Mapping[str, Sequence[Mapping[str, str]]]) -> list[str]:
    """What to run to re-embed the stale rows, with the user's own LightRAG settings
    (``aedit_relation`` embeds an edge as the graph now holds it)."""
    edges = sum(len(rows) for rows in stale.values())
    summary = target / "relmerge_export.json"
    return [
        f"{RELATION_VECTORS} keeps the old vectors of {edges} rewritten edge(s), listed under "
        f'"stale" in {summary}. Re-embed them with your LightRAG settings (Python):',
        f"  rag = LightRAG(working_dir={str(target)!r}, embedding_func=..., llm_model_func=...)",
        "  await rag.initialize_storages()",
        f"  for e in json.load(open({str(summary)!r}))['stale'][{RELATION_VECTORS!r}]:",
        "      await rag.aedit_relation(e['source'], e['target'], {})",
        "  await rag.finalize_storages()",
    ]
