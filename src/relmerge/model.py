"""Frozen value types shared by all stages: the relation record, the entities of a pair,
issues and decisions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictStr,
    field_validator,
    model_serializer,
    model_validator,
)

STEP_NAME = "deduplicate_relations"

RELATION_FIELDS: tuple[str, ...] = (
    "relation_id",
    "chunk_id",
    "document_id",
    "source_entity_id",
    "target_entity_id",
    "source_entity_name",
    "target_entity_name",
    "type",
    "name",
    "description",
    "attributes",
    "source_chunk_ids",
)


def _non_empty(value: str) -> str:
    stripped = value.strip()
    if not stripped:
        raise ValueError("must be a non-empty string")
    return stripped


def json_type_name(value: Any) -> str:
    """The JSON name of a parsed value's type, for messages read by people who wrote JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def coerce_attribute_value(value: Any) -> str | None:
    """Attribute values become strings: scalars as JSON text, nested values JSON-encoded.

    ``None`` means "drop this attribute" (JSON null carries no fact).
    """
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, bool | int | float):
        return orjson.dumps(value).decode()
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def coerce_attributes(raw: Any) -> dict[str, str]:
    """Validate and coerce an ``attributes`` object to ``dict[str, str]`` (see DESIGN §2)."""
    if not isinstance(raw, dict):
        raise ValueError(f"must be an object of string keys to values, not {json_type_name(raw)}")
    result: dict[str, str] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not key.strip():
            raise ValueError("attribute keys must be non-empty strings")
        coerced = coerce_attribute_value(value)
        if coerced is not None:
            result[key.strip()] = coerced
    return result


class ExtractedRelation(BaseModel):
    """One extracted relation, with exactly the fields of the step's data contract.

    Strings are trimmed and must be non-empty; ``attributes`` are coerced to ``str -> str``;
    ``source_chunk_ids`` lose repeats (order kept) and default to ``[chunk_id]`` when empty.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    relation_id: StrictStr
    chunk_id: StrictStr
    document_id: StrictStr
    source_entity_id: StrictStr
    target_entity_id: StrictStr
    source_entity_name: StrictStr
    target_entity_name: StrictStr
    type: StrictStr
    name: StrictStr
    description: StrictStr
    attributes: dict[str, str]
    source_chunk_ids: list[StrictStr]

    @field_validator(
        "relation_id",
        "chunk_id",
        "document_id",
        "source_entity_id",
        "target_entity_id",
        "source_entity_name",
        "target_entity_name",
        "type",
        "name",
        "description",
    )
    @classmethod
    def _strip_non_empty(cls, value: str) -> str:
        return _non_empty(value)

    @field_validator("attributes", mode="before")
    @classmethod
    def _coerce_attributes(cls, value: Any) -> dict[str, str]:
        return coerce_attributes(value)

    @field_validator("source_chunk_ids")
    @classmethod
    def _dedupe_chunk_ids(cls, value: list[str]) -> list[str]:
        if any(not v.strip() for v in value):
            raise ValueError("every chunk id must be a non-empty string")
        return list(dict.fromkeys(v.strip() for v in value))

    @model_validator(mode="after")
    def _check_relation(self) -> ExtractedRelation:
        if self.source_entity_id == self.target_entity_id:
            raise ValueError("source_entity_id equals target_entity_id (a self-loop)")
        if not self.source_chunk_ids:
            object.__setattr__(self, "source_chunk_ids", [self.chunk_id])
        return self

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in RELATION_FIELDS}

    def to_json(self) -> bytes:
        """Compact UTF-8 JSON in the contract's field order; non-ASCII text is kept as is."""
        return orjson.dumps(self.to_dict())

    def chunk_ids(self) -> list[str]:
        """Every chunk id this record carries: ``source_chunk_ids`` then ``chunk_id``.

        ``chunk_id`` of an earlier merge (``dedup_…``) is synthetic and not a source chunk.
        """
        ids = list(self.source_chunk_ids)
        if self.chunk_id not in ids and not self.chunk_id.startswith("dedup_"):
            ids.append(self.chunk_id)
        return ids


@dataclass(frozen=True)
class EntityContext:
    """One entity as the judge sees it: its (canonical) id, name, and optional profile and
    type (from an entities file, the step's ``entities`` artifact, or an app's context)."""

    entity_id: str
    name: str
    profile: str | None = None
    type: str | None = None


class IssueSubject(BaseModel):
    model_config = ConfigDict(frozen=True)

    type: str
    id: str


class IssueResolution(BaseModel):
    model_config = ConfigDict(frozen=True)

    action: str
    outcome: str


class StepIssue(BaseModel):
    """A run diagnostic with the seed's fields; it is not part of the graph output."""

    model_config = ConfigDict(frozen=True)

    step: str = STEP_NAME
    subject: IssueSubject
    code: str
    severity: Literal["info", "warning", "error"]
    message: str
    resolution: IssueResolution | None = None


Stage = Literal["exact", "semantic", "judge"]


class Decision(BaseModel):
    """One line of ``decisions.jsonl``: who decided what about which input relations.

    ``prompt``: the prompt and its version an LLM decision answered
    (``relation_cluster@2``); left out of the line of a decision no LLM made."""

    model_config = ConfigDict(frozen=True)

    member_ids: list[str]
    stage: Stage
    tier: str
    verdict: str
    output_ids: list[str] = Field(default_factory=list)
    scores: dict[str, float] = Field(default_factory=dict)
    guards: list[str] = Field(default_factory=list)
    model: str | None = None
    cached: bool = False
    round: int | None = None
    reason: str | None = None
    prompt: str | None = None

    @model_serializer(mode="wrap")
    def _without_unset_prompt(self, serialize: SerializerFunctionWrapHandler) -> Any:
        data = serialize(self)
        if isinstance(data, dict) and data.get("prompt") is None:
            data.pop("prompt", None)
        return data
