"""Task ``relation_cluster_many``: several blocks' ``relation_cluster`` questions in one
request (``llm_pack_tokens``), the instructions sent once.

Request: the first ``json`` block of the user message is a list of blocks, each
``{"block": "b1", "entities": {"A": …, "B": …}, "records": [...]}``: a block's records
(as ``relation_cluster`` shows them) under its own two entities and their profiles.
Answer: ``{"blocks": [{"block": "b1", "relation_list": [...], "mapping_table": {...},
"unsure": [[…]]}, ...]}``, one entry per block, each read exactly as a
``relation_cluster`` answer about that block's records alone: an id of another block is
not an input relation of this one, so no group ever spans two blocks.

A block's part that is invalid (or missing) is that block's alone: the others are kept,
and it is asked again on its own. An answer with no valid part, or that is not a list of
blocks, is invalid as a whole (retried with the reason, as every task).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from relmerge.errors import InvalidAnswerError
from relmerge.model import EntityContext
from relmerge.prompts import cluster_relations
from relmerge.prompts.base import (
    DATA_NOT_INSTRUCTIONS,
    answer_tokens,
    feedback_messages,
    inert_json,
    shown,
)
from relmerge.prompts.cluster_relations import ClusterEntry, ClusterOutcome
from relmerge.prompts.context import RULES, entity_data
from relmerge.providers.base import LLMRequest, Message

TASK = "relation_cluster_many"
VERSION = 1
PROMPT = f"{TASK}@{VERSION}"


class BlockAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a closed schema: see prompts.base

    block: str = Field(description='The block this part answers (its "block" name).')
    relation_list: list[ClusterEntry] = Field(default_factory=list)
    mapping_table: dict[str, list[str]] = Field(
        description="Canonical relation id -> relation ids of THIS block that state the same fact."
    )
    unsure: list[list[str]] = Field(
        default_factory=list, description="Groups of this block the context cannot decide."
    )


class ManyAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    blocks: list[BlockAnswer] = Field(description="One entry per block of the request.")


SCHEMA: dict[str, Any] = ManyAnswer.model_json_schema()

SYSTEM_PROMPT = f"""Task: {TASK}
You deduplicate the relations of a knowledge graph. The request holds several BLOCKS; the
records of one block all connect the same two entities (that block's A and B, described
with their profiles). Within each block, group the records that state the SAME FACT.
Blocks are independent: never group records of two different blocks.
{RULES}

Answer with one JSON object, one entry per block, in the order of the request:
{{"blocks": [{{"block": "<block name>",
"relation_list": [{{"relation_id": "<canonical id>", "Node1": "<source name>",
"Node2": "<target name>", "Relation": "<name>", "Type": "<type>",
"Description": "<one description with every distinct detail>", "Attr": {{}},
"merge_tag": true}}],
"mapping_table": {{"<canonical id>": ["<relation_id>", "<relation_id>", ...]}},
"unsure": [["<relation_id>", "<relation_id>"]]}}]}}
In each block's mapping_table list only groups of two or more records of that block that
state one fact; each relation_id at most once; use only relation_ids of that block's
records. Records you do not list stay separate; a block where nothing merges has an empty
mapping_table. Put a group in "unsure" only when the records and profiles truly cannot
decide; do not use it for clear cases.
{DATA_NOT_INSTRUCTIONS}"""


@dataclass(frozen=True)
class Part:
    """One block of a packed request: its records (as sent), its two entities and the
    positions of canary records among them (see ``cluster_relations.validate_answer``)."""

    records: Sequence[dict[str, Any]]
    entities: tuple[EntityContext, EntityContext]
    canary: Mapping[int, int | None]


def block_name(position: int) -> str:
    return f"b{position + 1}"


def block_data(position: int, part: Part) -> dict[str, Any]:
    """A block as the request shows it."""
    a, b = part.entities
    return {
        "block": block_name(position),
        "entities": {"A": entity_data(a), "B": entity_data(b)},
        "records": list(part.records),
    }


def blocks_json(parts: Sequence[Part]) -> str:
    """The blocks as one fenced JSON array, compact (a pack is read by the model, and its
    size is what packing saves): one line per block head and per record, no indentation.
    Inert as every prompt's data (``prompts.base.inert_json``)."""
    blocks = []
    for position, part in enumerate(parts):
        data = block_data(position, part)
        records = data.pop("records")
        head = inert_json(data)[:-1]  # the object without its closing brace
        lines = ",\n".join(inert_json(record) for record in records)
        blocks.append(f'{head},"records":[\n{lines}\n]}}')
    return "```json\n[\n" + ",\n".join(blocks) + "\n]\n```"


def build_request(
    parts: Sequence[Part],
    *,
    temperature: float,
    feedback: Sequence[tuple[str, str]] = (),
    max_answer_tokens: int | None = None,
) -> LLMRequest:
    user = (
        f"Blocks ({len(parts)}), each with its own records between its entities A and B:\n"
        + blocks_json(parts)
    )
    messages = [Message("system", SYSTEM_PROMPT), Message("user", user)]
    messages += feedback_messages(feedback, "Answer again with valid JSON.")
    need = sum(answer_tokens(cluster_relations.TASK, part.records, None) for part in parts)
    limit = need if max_answer_tokens is None else min(need, max_answer_tokens)
    return LLMRequest(TASK, tuple(messages), SCHEMA, temperature, limit, prompt=PROMPT)


def validate_answer(
    parsed: Any, parts: Sequence[Part]
) -> list[ClusterOutcome | InvalidAnswerError]:
    """Each block's part read as ``relation_cluster`` reads an answer about that block's
    records alone (so a group naming another block's record is invalid), or why it is
    invalid; raises when the answer is not a list of blocks or no part is valid."""
    if not isinstance(parsed, dict) or not isinstance(parsed.get("blocks"), list):
        raise InvalidAnswerError('the answer needs a "blocks" list, one entry per block')
    names = {block_name(i): i for i in range(len(parts))}
    found: dict[int, Any] = {}
    problems: dict[int, InvalidAnswerError] = {}
    for position, entry in enumerate(parsed["blocks"]):
        name = entry.get("block") if isinstance(entry, dict) else None
        if not isinstance(name, str) or name.strip() not in names:
            raise InvalidAnswerError(
                f"blocks[{position}] names block {shown(name)}, which is not in the request"
            )
        index = names[name.strip()]
        if index in found:
            problems[index] = InvalidAnswerError(f"block {name} is answered twice")
        found[index] = entry
    out: list[ClusterOutcome | InvalidAnswerError] = []
    for index, part in enumerate(parts):
        if index in problems:
            out.append(problems[index])
        elif index not in found:
            out.append(InvalidAnswerError(f"the answer has no entry for block {block_name(index)}"))
        else:
            try:
                out.append(
                    cluster_relations.validate_answer(found[index], part.records, part.canary)
                )
            except InvalidAnswerError as error:
                out.append(InvalidAnswerError(f"block {block_name(index)}: {error}"))
    if all(isinstance(item, InvalidAnswerError) for item in out):
        raise InvalidAnswerError("; ".join(str(item) for item in out)[:2000])
    return out
