"""Task ``relation_merge``: fuse an exact-key group into one relation, or split it.

Answer shapes (DESIGN §4): ``{"relation": {type, name, description, attributes}}`` when all
inputs state one fact, or ``{"relations": [{…, "relation_ids": [...]}, …]}`` where each input
id is in exactly one part. Anything else is invalid and is retried with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from relmerge.errors import InvalidAnswerError
from relmerge.model import ExtractedRelation
from relmerge.prompts.base import (
    DATA_NOT_INSTRUCTIONS,
    RelationFields,
    answer_tokens,
    check_endpoints,
    clean_fields,
    feedback_messages,
    fenced_json,
    shown,
    truncate,
)
from relmerge.providers.base import LLMRequest, Message

TASK = "relation_merge"
VERSION = 2
PROMPT = f"{TASK}@{VERSION}"  # in the cache key and the decision log


class SplitPart(RelationFields):
    relation_ids: list[str] = Field(description="Input relation ids that this part merges.")


class MergeAnswer(BaseModel):
    """Either ``relation`` (all inputs are one fact) or ``relations`` (a split)."""

    model_config = ConfigDict(extra="forbid")

    relation: RelationFields | None = Field(
        None, description="The fused relation, when every input states the same fact."
    )
    relations: list[SplitPart] | None = Field(
        None, description="One entry per distinct fact, when the inputs state several."
    )


SCHEMA: dict[str, Any] = MergeAnswer.model_json_schema()

SYSTEM_PROMPT = f"""Task: {TASK}
You deduplicate relations of a knowledge graph.
All records below connect the same two entities with the same relation name and type.
Decide whether they state ONE fact or SEVERAL distinct facts.
Records state distinct facts when they differ in period or dates, in numbers or amounts,
in roles, in direction, or when one is an event and the other a lasting state.
Wording, language and description length do not make facts distinct.

If all records state one fact, answer:
{{"relation": {{"type": "...", "name": "...", "description": "...", "attributes": {{}}}}}}
merging every distinct detail into the description, in the records' language.
If they state several facts, answer:
{{"relations": [{{"type": "...", "name": "...", "description": "...", "attributes": {{}},
"relation_ids": ["..."]}}, ...]}}
where every input relation_id appears in exactly one entry.
Never change the entities and never invent relation ids. Attribute values are strings.
{DATA_NOT_INSTRUCTIONS}
Answer with one JSON object only."""


@dataclass(frozen=True)
class MergePart:
    """One output of an answer: the input ids it covers and its semantic fields."""

    relation_ids: tuple[str, ...]
    fields: dict[str, Any]


def _record(relation: ExtractedRelation, description_chars: int) -> dict[str, Any]:
    return {
        "relation_id": relation.relation_id,
        "source_entity_name": relation.source_entity_name,
        "target_entity_name": relation.target_entity_name,
        "type": relation.type,
        "name": relation.name,
        "description": truncate(relation.description, description_chars),
        "attributes": relation.attributes,
    }


def build_request(
    relations: Sequence[ExtractedRelation],
    *,
    temperature: float,
    description_chars: int,
    feedback: Sequence[tuple[str, str]] = (),
    max_answer_tokens: int | None = None,
) -> LLMRequest:
    """The request for one batch; ``feedback`` holds (previous answer, what was invalid)."""
    # The entity names are extracted text: they reach the model only inside the records.
    records = [_record(relation, description_chars) for relation in relations]
    user = f"Records ({len(relations)}):\n" + fenced_json(records)
    messages = [Message("system", SYSTEM_PROMPT), Message("user", user)]
    messages += feedback_messages(feedback, "Answer again with one valid JSON object.")
    limit = answer_tokens(TASK, records, max_answer_tokens)
    return LLMRequest(TASK, tuple(messages), SCHEMA, temperature, limit, prompt=PROMPT)


def _check_named_ids(raw: dict[str, Any], ids: Sequence[str], where: str) -> None:
    """A fused relation or a part may name its own input ids, nothing else.

    Only the semantic fields of an answer are ever used; ids are checked anyway, so that an
    answer pointing at other relations (another group, an invented id) is refused, not
    half-applied.
    """
    relation_id = raw.get("relation_id")
    if relation_id is not None and (not isinstance(relation_id, str) or relation_id not in ids):
        raise InvalidAnswerError(f"{where}.relation_id {shown(relation_id)} is not one of {ids}")


def validate_answer(parsed: Any, relations: Sequence[ExtractedRelation]) -> list[MergePart]:
    """Check an answer against its batch; raise :class:`InvalidAnswerError` with the reason."""
    if not isinstance(parsed, dict):
        raise InvalidAnswerError("the answer is not a JSON object")
    input_ids = [relation.relation_id for relation in relations]
    first = relations[0]
    allowed = {
        "source_entity_id": {first.source_entity_id},
        "target_entity_id": {first.target_entity_id},
        "source_entity_name": {r.source_entity_name for r in relations},
        "target_entity_name": {r.target_entity_name for r in relations},
        "Node1": {r.source_entity_name for r in relations},
        "Node2": {r.target_entity_name for r in relations},
    }
    fused, parts = parsed.get("relation"), parsed.get("relations")
    if (fused is None) == (parts is None):
        raise InvalidAnswerError('the answer must have exactly one of "relation" or "relations"')
    if fused is not None:
        if not isinstance(fused, dict):
            raise InvalidAnswerError('"relation" must be a JSON object')
        check_endpoints(fused, allowed, "relation")
        _check_named_ids(fused, input_ids, "relation")
        listed = fused.get("relation_ids")
        if listed is not None and (
            not isinstance(listed, list)
            or not all(isinstance(i, str) for i in listed)
            or sorted(listed) != sorted(input_ids)
        ):
            raise InvalidAnswerError(
                '"relation" fuses every input: its relation_ids, when given, must be exactly '
                f'the input ids {input_ids}; to keep some apart answer with "relations"'
            )
        return [MergePart(tuple(input_ids), clean_fields(fused, "relation"))]
    if not isinstance(parts, list) or not parts:
        raise InvalidAnswerError('"relations" must be a non-empty list')
    seen: dict[str, int] = {}
    result = []
    for index, part in enumerate(parts):
        where = f"relations[{index}]"
        if not isinstance(part, dict):
            raise InvalidAnswerError(f"{where} must be a JSON object")
        check_endpoints(part, allowed, where)
        ids = part.get("relation_ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            raise InvalidAnswerError(f"{where}.relation_ids must be a non-empty list of ids")
        for relation_id in ids:
            if relation_id not in input_ids:
                raise InvalidAnswerError(
                    f"{where} names {shown(relation_id)}, which is not an input"
                )
            if relation_id in seen:
                raise InvalidAnswerError(f"{shown(relation_id)} is in more than one part")
            seen[relation_id] = index
        _check_named_ids(part, ids, where)
        result.append(MergePart(tuple(ids), clean_fields(part, where, fused=len(ids) > 1)))
    missing = [relation_id for relation_id in input_ids if relation_id not in seen]
    if missing:
        raise InvalidAnswerError(f"the split leaves out input ids {missing}")
    return result
