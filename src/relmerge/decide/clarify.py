"""Unsure cases, written for a person: the records, the entities, the scores, the reason.

The id depends only on the records' content and the entity context, so the same question
asked again (a re-run, another batch) has the same id and its answer can be reused.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import orjson

from relmerge.model import EntityContext, ExtractedRelation


def clarification_id(
    relations: Sequence[ExtractedRelation], entities: Sequence[EntityContext]
) -> str:
    content = sorted(
        orjson.dumps(
            {k: v for k, v in r.to_dict().items() if k not in ("chunk_id", "source_chunk_ids")},
            option=orjson.OPT_SORT_KEYS,
        )
        for r in relations
    )
    context = [orjson.dumps([e.entity_id, e.name, e.profile]) for e in entities]
    digest = hashlib.sha256(b"\n".join([*content, *context])).hexdigest()
    return "clarify_" + digest[:16]


def clarification(
    relations: Sequence[ExtractedRelation],
    member_ids: Sequence[str],
    entities: Sequence[EntityContext],
    scores: dict[str, float],
    reason: str | None,
    policy: str,
) -> dict[str, Any]:
    return {
        "id": clarification_id(relations, entities),
        "member_ids": list(member_ids),
        "records": [relation.to_dict() for relation in relations],
        "context": {
            "entities": [
                {"entity_id": e.entity_id, "name": e.name, "type": e.type, "profile": e.profile}
                for e in entities
            ]
        },
        "scores": scores,
        "reason": reason,
        "policy_decision": policy,
        "answers": ["merge", "keep_both"],
    }
