"""Deterministic in-process models that implement the real protocol, for tests and bench.

They go through the same parsing, validation and accounting as a real endpoint; only the
network is missing. A script written for the one-question tasks also answers packed
requests (``relation_cluster_many``, on by default): each block is put to it as the
block's own question, and its answers are joined into the packed answer (``answer_blocks``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from relmerge.normalize import normalize_key_text
from relmerge.providers.base import LLMRequest, LLMResult, Message, Usage
from relmerge.providers.parsing import parse_json_answer

Answer = str | dict[str, Any] | Exception
Script = Callable[[LLMRequest, list[dict[str, Any]]], Answer]

_JSON_BLOCK = re.compile(r"```json\n(.*?)\n```", re.DOTALL)

# relmerge.prompts.cluster_many.TASK (a layer above this one): several blocks in one request.
PACKED_TASK = "relation_cluster_many"


def request_records(request: LLMRequest) -> list[dict[str, Any]]:
    """The records of a request: the JSON array in its first user message's ```json block."""
    for message in request.messages:
        if message.role == "user":
            match = _JSON_BLOCK.search(message.content)
            if match:
                records = orjson.loads(match.group(1))
                return records if isinstance(records, list) else []
    return []


def block_question(block: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """A block of a packed request as the block's own question would ask it: its task
    (``relation_judge`` for two records of different exact keys, the first existing and
    the second the candidate; ``relation_cluster`` for more, or for two of one key, whose
    merged text the model writes: ``decide.block.writes_text``) and its records as that
    request shows them."""
    records = [dict(record) for record in block.get("records") or []]
    if len(records) == 2 and len({_shown_key(record) for record in records}) == 2:
        roles = ("existing", "candidate")
        shown = [{**r, "role": role} for r, role in zip(records, roles, strict=True)]
        return "relation_judge", shown
    return "relation_cluster", records


def _shown_key(record: Mapping[str, Any]) -> tuple[str, ...]:
    """A shown record's exact key, as far as a request shows it (endpoints by name)."""
    return (
        str(record.get("source_entity_name")),
        str(record.get("target_entity_name")),
        normalize_key_text(str(record.get("name") or "")),
        normalize_key_text(str(record.get("type") or "")),
    )


def question_text(records: Sequence[dict[str, Any]], entities: Any) -> str:
    """The user message of a block's own question: its records, then its two entities."""
    return (
        f"Records ({len(records)}), each between entity A and entity B:\n```json\n"
        + orjson.dumps(list(records), option=orjson.OPT_INDENT_2).decode()
        + "\n```\nEntities A and B:\n```json\n"
        + orjson.dumps(entities or {}, option=orjson.OPT_INDENT_2).decode()
        + "\n```"
    )


def block_part(name: str, records: Sequence[dict[str, Any]], answer: Any) -> dict[str, Any] | None:
    """A block's own answer as its part of a packed answer: a verdict becomes the mapping
    table (or unsure group) of the pair; None (the part is left out, so the block asks
    again alone and meets that answer there) when it is neither a verdict nor a mapping
    table: an invalid answer, an error to raise."""
    if isinstance(answer, str):
        answer = parse_json_answer(answer)
    if not isinstance(answer, dict):
        return None
    if "mapping_table" in answer:
        return {**answer, "block": name}
    if answer.get("verdict") not in ("merge", "keep_both", "unsure") or len(records) != 2:
        return None
    ids = [str(record["relation_id"]) for record in records]
    merge = answer["verdict"] == "merge"
    return {
        "block": name,
        "mapping_table": {ids[0]: ids} if merge else {},
        "unsure": [ids] if answer["verdict"] == "unsure" else [],
    }


def answer_blocks(
    blocks: Sequence[Mapping[str, Any]],
    answer_one: Callable[[str, list[dict[str, Any]], Mapping[str, Any]], Any],
) -> dict[str, Any]:
    """A packed answer from ``answer_one(task, records, block)``, each block asked as its
    own question (``block_question``). An exception raised for one block fails the whole
    request, as a provider error does."""
    parts = []
    for block in blocks:
        task, records = block_question(block)
        part = block_part(str(block.get("block")), records, answer_one(task, records, block))
        if part is not None:
            parts.append(part)
    return {"blocks": parts}


def _alone(
    request: LLMRequest, task: str, records: list[dict[str, Any]], block: Mapping[str, Any]
) -> LLMRequest:
    """The request of one block's own question (no instructions: scripts read the task and
    the records)."""
    user = Message("user", question_text(records, block.get("entities")))
    return LLMRequest(task, (user,), {}, request.temperature, request.max_tokens)


class ScriptedLLM:
    """Answers from a script: a function of (request, records) or a list used in order.

    An ``Exception`` answer is raised, which lets tests play provider failures. With
    ``per_block`` (the default), a function is asked each block of a packed request as the
    block's own question (``answer_blocks``), so a script of the one-question tasks answers
    packs too; ``requests`` holds the packed request as sent. ``per_block=False`` hands the
    packed request to the function as it is.
    """

    available = True

    def __init__(
        self, script: Script | list[Answer], name: str = "scripted", per_block: bool = True
    ) -> None:
        self.name = name
        self._script = script
        self.per_block = per_block
        self.requests: list[LLMRequest] = []

    async def invoke(self, request: LLMRequest) -> LLMResult:
        self.requests.append(request)
        records = request_records(request)
        script = self._script
        if callable(script) and self.per_block and request.task == PACKED_TASK:
            answer: Answer = answer_blocks(
                records,
                lambda task, shown, block: script(_alone(request, task, shown, block), shown),
            )
        elif callable(script):
            answer = script(request, records)
        else:
            if not script:
                raise AssertionError("ScriptedLLM ran out of scripted answers")
            answer = script.pop(0)
        if isinstance(answer, Exception):
            raise answer
        text = answer if isinstance(answer, str) else orjson.dumps(answer).decode()
        return LLMResult(
            text=text,
            parsed=parse_json_answer(text),
            model=self.name,
            usage=Usage(
                prompt_tokens=sum(len(m.content) for m in request.messages) // 4,
                completion_tokens=len(text) // 4,
            ),
        )


def merge_all(request: LLMRequest, records: list[dict[str, Any]]) -> dict[str, Any]:
    """A script that fuses every record of a ``relation_merge`` request into the first."""
    first = records[0]
    return {"relation": {key: first[key] for key in ("type", "name", "description", "attributes")}}


def instant_merge_model() -> ScriptedLLM:
    """A model that answers every merge at once by keeping the first record's fields."""
    return ScriptedLLM(merge_all, name="instant-merge")
