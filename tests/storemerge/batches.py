"""Small batches whose merges are decided by the rules alone (no LLM, hash embedder)."""

from __future__ import annotations

from typing import Any

from tests.factories import record

FOUNDED = "Alice founded Acme in 1990."


def batch(name: str, count: int = 30, shared: int = 5) -> list[dict[str, Any]]:
    """``count`` relations in pairs e{i % 10}-x; the first ``shared`` state the fact that
    every batch states (same pair, name and description)."""
    records = []
    for i in range(count):
        same = i < shared
        records.append(
            record(
                f"{name}-{i}",
                source_entity_id=f"e{i % 10}",
                source_entity_name=f"Entity {i % 10}",
                description=FOUNDED if same else f"{name} fact number {i} about entity {i % 10}.",
                name="founded" if same else f"rel {name} {i}",
            )
        )
    return records
