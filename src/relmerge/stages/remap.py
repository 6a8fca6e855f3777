"""Entity remap: rewrite relation endpoints through the upstream entity-dedup mapping.

Done before any grouping, so duplicates whose endpoints were aliases
(``entity_shanghai_a`` / ``entity_shanghai_b``) meet under one canonical pair.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relmerge.errors import InputError
from relmerge.model import (
    ExtractedRelation,
    IssueResolution,
    IssueSubject,
    StepIssue,
    json_type_name,
)


def validate_entity_mapping(raw: Any) -> dict[str, str]:
    """Check a mapping is a string -> string object and resolve chains (a -> b -> c)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InputError(
            f"entity id mapping must be a JSON object of id -> canonical id, "
            f"not {json_type_name(raw)}"
        )
    mapping: dict[str, str] = {}
    for key, value in raw.items():
        if not all(isinstance(item, str) and item.strip() for item in (key, value)):
            raise InputError(
                f"entity id mapping must map non-empty strings to non-empty strings; "
                f"entry {_short(key)} -> {_short(value)} does not"
            )
        mapping[key.strip()] = value.strip()
    resolved: dict[str, str] = {}
    for key in mapping:
        seen = [key]
        target = mapping[key]
        while target in mapping and mapping[target] != target:
            if target in seen:
                raise InputError(f"entity id mapping has a cycle: {' -> '.join([*seen, target])}")
            seen.append(target)
            target = mapping[target]
        resolved[key] = target
    return resolved


def _short(value: object) -> str:
    """``repr`` cut short: an error message stays one readable line whatever the value."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def self_loop_issue(relation: ExtractedRelation, canonical: str) -> StepIssue:
    """The issue of a relation kept unmerged because both endpoints map to ``canonical``."""
    return StepIssue(
        subject=IssueSubject(type="relation", id=relation.relation_id),
        code="self_loop_after_entity_mapping",
        severity="warning",
        message=(
            f"entity mapping sends both endpoints ({relation.source_entity_id}, "
            f"{relation.target_entity_id}) to {canonical}"
        ),
        resolution=IssueResolution(
            action="kept_original_record",
            outcome="The relation was not deduplicated and keeps its endpoint ids.",
        ),
    )


def remap_relation(
    relation: ExtractedRelation, mapping: Mapping[str, str]
) -> tuple[ExtractedRelation, str | None]:
    """``(relation with canonical endpoints, None)``, or ``(relation, canonical id)`` when
    both endpoints map to one entity (the relation is then kept as it is)."""
    source = mapping.get(relation.source_entity_id, relation.source_entity_id)
    target = mapping.get(relation.target_entity_id, relation.target_entity_id)
    if source == target:
        return relation, source
    if (source, target) != (relation.source_entity_id, relation.target_entity_id):
        relation = relation.model_copy(
            update={"source_entity_id": source, "target_entity_id": target}
        )
    return relation, None
