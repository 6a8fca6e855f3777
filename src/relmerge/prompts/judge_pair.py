"""Task ``relation_judge``: is a candidate relation the same fact as existing ones?

Answer: ``{"verdict": "merge"|"keep_both"|"unsure", "reason": str, "duplicate_of": id|null}``.
Seed 000's prompt: both entities with their profiles, the existing relations and the new
candidate; with context the model judges meaning, not words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from relmerge.errors import InvalidAnswerError
from relmerge.model import EntityContext
from relmerge.prompts.base import (
    DATA_NOT_INSTRUCTIONS,
    answer_tokens,
    feedback_messages,
    fenced_json,
    shown,
)
from relmerge.prompts.context import RULES, entity_block
from relmerge.providers.base import LLMRequest, Message

TASK = "relation_judge"
VERSION = 2
PROMPT = f"{TASK}@{VERSION}"  # in the cache key and the decision log

JudgeVerdict = Literal["merge", "keep_both", "unsure"]


class JudgeAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    verdict: JudgeVerdict = Field(description="merge, keep_both or unsure.")
    reason: str = Field(description="One sentence: why.")
    duplicate_of: str | None = Field(
        None, description="relation_id of the existing relation the candidate duplicates."
    )


SCHEMA: dict[str, Any] = JudgeAnswer.model_json_schema()

SYSTEM_PROMPT = f"""Task: {TASK}
You check a knowledge graph for duplicate relations. You get two entities with their
profiles, the relations already stored between them ("existing") and a new "candidate".
Decide whether the candidate describes the same relationship as one existing relation
(merge) or a distinct fact or aspect worth keeping (keep_both).
{RULES}

Answer with one JSON object:
{{"verdict": "merge" | "keep_both" | "unsure", "reason": "<one sentence>",
"duplicate_of": "<relation_id of the existing relation>" or null}}
Use "unsure" only when the records and profiles truly cannot decide.
{DATA_NOT_INSTRUCTIONS}"""


@dataclass(frozen=True)
class JudgeOutcome:
    verdict: JudgeVerdict
    reason: str
    duplicate_of: str | None


def build_request(
    existing: Sequence[dict[str, Any]],
    candidate: dict[str, Any],
    entities: tuple[EntityContext, EntityContext],
    *,
    temperature: float,
    feedback: Sequence[tuple[str, str]] = (),
    max_answer_tokens: int | None = None,
) -> LLMRequest:
    records = [{**r, "role": "existing"} for r in existing] + [{**candidate, "role": "candidate"}]
    user = (
        f"Records ({len(records)}), each between entity A and entity B:\n"
        + fenced_json(records)
        + "\n"
        + entity_block(entities)
    )
    messages = [Message("system", SYSTEM_PROMPT), Message("user", user)]
    messages += feedback_messages(feedback, "Answer again with valid JSON.")
    limit = answer_tokens(TASK, records, max_answer_tokens)
    return LLMRequest(TASK, tuple(messages), SCHEMA, temperature, limit, prompt=PROMPT)


def validate_answer(parsed: Any, existing_ids: Sequence[str]) -> JudgeOutcome:
    if not isinstance(parsed, dict):
        raise InvalidAnswerError("the answer is not a JSON object")
    verdict = parsed.get("verdict")
    if isinstance(verdict, str):
        verdict = verdict.strip().lower().replace(" ", "_").replace("-", "_")
    if verdict not in ("merge", "keep_both", "unsure"):
        raise InvalidAnswerError('"verdict" must be "merge", "keep_both" or "unsure"')
    reason = parsed.get("reason")
    reason = reason.strip() if isinstance(reason, str) else ""
    duplicate_of = parsed.get("duplicate_of")
    if duplicate_of is not None and (
        not isinstance(duplicate_of, str) or duplicate_of not in existing_ids
    ):
        raise InvalidAnswerError(
            f"duplicate_of {shown(duplicate_of)} is not one of the existing relation ids "
            f"{list(existing_ids)}"
        )
    if verdict == "merge" and duplicate_of is None:
        if len(existing_ids) != 1:
            raise InvalidAnswerError('a "merge" verdict must name "duplicate_of"')
        duplicate_of = existing_ids[0]
    checked: JudgeVerdict = (
        "merge" if verdict == "merge" else ("keep_both" if verdict == "keep_both" else "unsure")
    )
    return JudgeOutcome(checked, reason, duplicate_of if checked == "merge" else None)
