"""Relations, batches and raw table reads for the relation store tests."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from relmerge.graphstore import Batch, PairState, pair_of
from relmerge.graphstore.url import sqlite_path
from relmerge.model import ExtractedRelation


def relation(
    relation_id: str, source: str = "e_ada", target: str = "e_norrbeck", **fields: Any
) -> ExtractedRelation:
    """A valid relation with every field of the contract set (attributes, several chunk
    ids, non-ASCII text), any field overridable."""
    base: dict[str, Any] = {
        "relation_id": relation_id,
        "chunk_id": f"chunk_{relation_id}",
        "document_id": "doc_1",
        "source_entity_id": source,
        "target_entity_id": target,
        "source_entity_name": source.removeprefix("e_").title(),
        "target_entity_name": target.removeprefix("e_").title(),
        "type": "employment",
        "name": "CEO of",
        "description": f"Description of {relation_id} — Zoë, 徐汇区.",
        "attributes": {"since": "2019", "role": "chief executive"},
        "source_chunk_ids": [f"chunk_{relation_id}", "chunk_shared"],
    }
    base.update(fields)
    return ExtractedRelation.model_validate(base)


def joined(stored: ExtractedRelation, new: ExtractedRelation) -> ExtractedRelation:
    """``stored`` with ``new``'s chunk ids appended: what a merge writes back."""
    chunks = list(dict.fromkeys([*stored.source_chunk_ids, *new.source_chunk_ids]))
    return stored.model_copy(update={"source_chunk_ids": chunks})


def versions(states: dict[tuple[str, str], PairState]) -> dict[tuple[str, str], int]:
    return {pair: state.version for pair, state in states.items()}


def merge_batch(
    batch_id: str,
    states: dict[tuple[str, str], PairState],
    inserts: Sequence[ExtractedRelation] = (),
    updates: Sequence[ExtractedRelation] = (),
    mapping: dict[str, str] | None = None,
    **fields: Any,
) -> Batch:
    return Batch(
        batch_id=batch_id,
        versions=versions(states),
        inserts=list(inserts),
        updates=list(updates),
        mapping=mapping if mapping is not None else {r.relation_id: r.relation_id for r in inserts},
        **fields,
    )


def raw_rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows read straight from the database, past the store (to see its tables)."""
    if url.startswith("sqlite:"):
        with sqlite3.connect(sqlite_path(url)) as connection:
            return [tuple(row) for row in connection.execute(sql).fetchall()]
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        return [tuple(row) for row in connection.execute(sql).fetchall()]


def raw_execute(url: str, sql: str) -> None:
    if url.startswith("sqlite:"):
        database = sqlite3.connect(sqlite_path(url))
        try:
            database.execute(sql)
            database.commit()
        finally:
            database.close()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(sql)


__all__ = ["joined", "merge_batch", "pair_of", "raw_execute", "raw_rows", "relation", "versions"]
