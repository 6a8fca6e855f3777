"""Turning raw input records into ``ExtractedRelation`` or a rejection with its reason.

Nothing is dropped silently: every record that cannot be read as a relation becomes a
``Rejected`` entry (written to ``rejected.jsonl``), with where it came from and why.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from relmerge.model import ExtractedRelation

_MISSING = object()


@dataclass(frozen=True)
class RawRecord:
    """One input record before validation. ``data`` is the parsed JSON, or ``_MISSING``
    with ``error`` set when the bytes could not even be parsed."""

    origin: str
    data: Any = _MISSING
    error: str | None = None
    text: str | None = None


@dataclass(frozen=True)
class Rejected:
    origin: str
    reason: str
    record: Any

    def to_dict(self) -> dict[str, Any]:
        return {"origin": self.origin, "reason": self.reason, "record": self.record}


def unreadable(origin: str, error: str, text: str | None) -> RawRecord:
    return RawRecord(origin=origin, error=error, text=text)


def describe_validation_error(error: ValidationError) -> str:
    """``missing field 'name'; description: must be a non-empty string``."""
    problems = []
    for problem in error.errors():
        location = ".".join(str(part) for part in problem["loc"])
        message = problem["msg"].removeprefix("Value error, ")
        if problem["type"] == "missing":
            problems.append(f"missing field {location!r}")
        elif problem["type"] == "extra_forbidden":
            problems.append(f"unknown field {location!r}")
        elif location:
            problems.append(f"{location}: {message}")
        else:
            problems.append(message)
    return "; ".join(problems)


def validate_records(raws: Iterable[RawRecord]) -> tuple[list[ExtractedRelation], list[Rejected]]:
    """Validate in input order; a repeated ``relation_id`` rejects the later record."""
    relations: list[ExtractedRelation] = []
    rejected: list[Rejected] = []
    seen: set[str] = set()
    for raw in raws:
        if raw.data is _MISSING:
            rejected.append(Rejected(raw.origin, raw.error or "unreadable record", raw.text))
            continue
        if not isinstance(raw.data, dict):
            reason = f"a relation must be a JSON object, not {type(raw.data).__name__}"
            rejected.append(Rejected(raw.origin, reason, raw.data))
            continue
        try:
            relation = ExtractedRelation.model_validate(raw.data)
        except ValidationError as error:
            rejected.append(Rejected(raw.origin, describe_validation_error(error), raw.data))
            continue
        if relation.relation_id in seen:
            reason = f"duplicate relation_id {relation.relation_id!r} (an earlier record has it)"
            rejected.append(Rejected(raw.origin, reason, raw.data))
            continue
        seen.add(relation.relation_id)
        relations.append(relation)
    return relations, rejected
