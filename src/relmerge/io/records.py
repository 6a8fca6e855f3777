"""Turning raw input records into ``ExtractedRelation`` or a rejection with its reason.

Nothing is dropped silently: every record that cannot be read as a relation becomes a
``Rejected`` entry (written to ``rejected.jsonl``), with where it came from and why.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from relmerge.errors import InvalidKeyError
from relmerge.model import ExtractedRelation, json_type_name
from relmerge.stores.base import validate_key

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


# pydantic's type errors, said in JSON's words together with what the record holds instead.
_EXPECTED = {"string_type": "a string", "list_type": "an array", "dict_type": "an object"}


def describe_validation_error(error: ValidationError) -> str:
    """``missing field 'name'; description: must be a string, not an array``."""
    problems = []
    for problem in error.errors():
        location = ".".join(str(part) for part in problem["loc"])
        message = problem["msg"].removeprefix("Value error, ")
        if problem["type"] == "missing":
            problems.append(f"missing field {location!r}")
        elif problem["type"] == "extra_forbidden":
            problems.append(f"unknown field {location!r}")
        elif problem["type"] in _EXPECTED:
            expected = _EXPECTED[problem["type"]]
            problems.append(
                f"{location}: must be {expected}, not {json_type_name(problem['input'])}"
            )
        elif location:
            problems.append(f"{location}: {message}")
        else:
            problems.append(message)
    return "; ".join(problems)


class RecordChecker:
    """Validates records one at a time, in input order, so input can stream through:
    a repeated ``relation_id`` rejects the later record."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def check(self, raw: RawRecord) -> ExtractedRelation | Rejected:
        if raw.data is _MISSING:
            return Rejected(raw.origin, raw.error or "unreadable record", raw.text)
        if not isinstance(raw.data, dict):
            reason = f"a relation must be a JSON object, not {json_type_name(raw.data)}"
            return Rejected(raw.origin, reason, raw.data)
        try:
            relation = ExtractedRelation.model_validate(raw.data)
        except ValidationError as error:
            return Rejected(raw.origin, describe_validation_error(error), raw.data)
        key_problem = _output_key_problem(relation.relation_id)
        if key_problem is not None:
            return Rejected(raw.origin, key_problem, raw.data)
        if relation.relation_id in self.seen:
            reason = f"duplicate relation_id {relation.relation_id!r} (an earlier record has it)"
            return Rejected(raw.origin, reason, raw.data)
        self.seen.add(relation.relation_id)
        return relation


def validate_records(raws: Iterable[RawRecord]) -> tuple[list[ExtractedRelation], list[Rejected]]:
    """Validate in input order; a repeated ``relation_id`` rejects the later record."""
    relations: list[ExtractedRelation] = []
    rejected: list[Rejected] = []
    checker = RecordChecker()
    for raw in raws:
        checked = checker.check(raw)
        if isinstance(checked, Rejected):
            rejected.append(checked)
        else:
            relations.append(checked)
    return relations, rejected


def _output_key_problem(relation_id: str) -> str | None:
    """Why ``relation_id`` cannot name its output object ``{prefix}/{relation_id}.json``.

    Checked here so that one such id is one rejected record, not a failed write after the
    whole run (``../x``, ``/abs``, ``a\\b``, ``a//b`` and NUL bytes make unsafe keys).
    """
    try:
        validate_key(f"deduplicated_relations/{relation_id}.json")
    except InvalidKeyError as error:
        return f"relation_id {relation_id!r} cannot name its output file: {error}"
    return None
