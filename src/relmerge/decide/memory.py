"""Remembered answers as the kernel uses them: a person's merge / keep_both for a pair.

The key covers what the question is about — both relations' content (type, name,
description, attributes; not ids or chunks) and the entity context (names, profiles) —
so the same question is never asked twice: by the judge, by a later batch, by another run.
Where answers are kept (a JSONL file) is ``relmerge.review.memory``'s business.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import orjson

from relmerge.decide.tiers import PairDecision, Verdict
from relmerge.model import EntityContext, ExtractedRelation

Answer = Literal["merge", "keep_both"]
ANSWERS = ("merge", "keep_both")


class Remembered(Protocol):
    """Answers by pair key (``relmerge.review.memory.AnswerMemory`` is one)."""

    def __len__(self) -> int: ...

    def get(self, key: str) -> Answer | None: ...


def _content(relation: Mapping[str, Any]) -> bytes:
    return orjson.dumps(
        {
            "type": relation["type"],
            "name": relation["name"],
            "description": relation["description"],
            "attributes": relation.get("attributes") or {},
        },
        option=orjson.OPT_SORT_KEYS,
    )


def pair_key(a: Mapping[str, Any], b: Mapping[str, Any], entities: Sequence[EntityContext]) -> str:
    """Order-free key of the question "do ``a`` and ``b`` state the same fact here?"."""
    relations = sorted((_content(a), _content(b)))
    context = sorted(orjson.dumps([e.name, e.profile or ""]) for e in entities)
    digest = hashlib.sha256(b"\n".join([*relations, b"--", *context])).hexdigest()
    return digest[:32]


def remembered(
    pairs: Sequence[PairDecision],
    relations: Sequence[ExtractedRelation],
    entities: Sequence[EntityContext],
    memory: Remembered | None,
) -> list[PairDecision]:
    """Pairs the rules left undecided take a person's earlier answer (tier remembered); a
    remembered keep binds like a hard keep."""
    if memory is None or not len(memory):
        return list(pairs)
    resolved = []
    for p in pairs:
        answer = None
        if p.verdict == "undecided":
            key = pair_key(relations[p.a].to_dict(), relations[p.b].to_dict(), entities)
            answer = memory.get(key)
        if answer is None:
            resolved.append(p)
            continue
        verdict: Verdict = "merge" if answer == "merge" else "keep"
        resolved.append(
            PairDecision(p.a, p.b, verdict, "remembered", verdict == "keep", (), p.scores, p.mode)
        )
    return resolved
