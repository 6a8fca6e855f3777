"""Task ``relation_cluster_many``: several blocks' ``relation_cluster`` questions in one
request (``llm_pack_tokens``), the instructions sent once.

Request: the first ``json`` block of the user message is a list of blocks, each
``{"block": "b1", "entities": {"A": …, "B": …}, "records": [...]}``: a block's records
(as ``relation_cluster`` shows them) under its own two entities and their profiles, with
two savings a pack allows:

* **Short record names.** Each record is named ``r1``, ``r2``, … (numbered across the
  request, in block order) instead of its relation id, and shows no ``merged_from``
  list. A model copies ``r7`` where it mistypes ``rel_3b1e81deb7e6`` (a small local model
  wrote ``rel_`` for ``rel-`` in a third of its packed parts), and the short names cost
  fewer tokens to read and to write. The names are the request's own: the answer is read
  back by position (:func:`shown_blocks`), never by a relation id.
* **Profiles once.** An entity that an earlier block of the request already shows (the
  same name, type and profile) shows its name and type and ``"profile": "(as in block
  b1)"``: hub entities sit in many blocks of a chunk.

Answer: ``{"blocks": [{"block": "b1", "relation_list": [...], "mapping_table": {...},
"unsure": [[…]]}, ...]}``, one entry per block, each block's part read exactly as a
``relation_cluster`` answer about that block's records alone. The names being unique
across the request, a group belongs to the block of its records, under whichever entry
the answer lists it; a group of two blocks' records makes both parts invalid, so no group
ever spans two blocks.

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
VERSION = 2
PROMPT = f"{TASK}@{VERSION}"


class BlockAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a closed schema: see prompts.base

    block: str = Field(description='The block this part answers (its "block" name).')
    relation_list: list[ClusterEntry] = Field(default_factory=list)
    mapping_table: dict[str, list[str]] = Field(
        description="Canonical record name -> names of THIS block's records stating that fact."
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
with their profiles; an entity already described in an earlier block says so). Records
are named r1, r2, ... Within each block, group the records that state the SAME FACT.
Blocks are independent: never group records of two different blocks.
{RULES}

Answer with one JSON object, one entry per block, in the order of the request:
{{"blocks": [{{"block": "<block name>",
"relation_list": [{{"relation_id": "<record name>", "Node1": "<source name>",
"Node2": "<target name>", "Relation": "<name>", "Type": "<type>",
"Description": "<one description with every distinct detail>", "Attr": {{}},
"merge_tag": true}}],
"mapping_table": {{"<record name>": ["<record name>", "<record name>", ...]}},
"unsure": [["<record name>", "<record name>"]]}}]}}
In each block's mapping_table list only groups of two or more records of that block that
state one fact; each record name at most once; use only the names (r1, r2, ...) of that
block's records. Records you do not list stay separate; a block where nothing merges has an empty
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


def record_name(number: int) -> str:
    """A record's name in a packed request (``number`` counts from 1 across it)."""
    return f"r{number}"


def shown_blocks(parts: Sequence[Part]) -> list[dict[str, Any]]:
    """The blocks as the request shows them: records under their short names (no
    ``merged_from``), an entity's profile only where the request first shows it. A
    function of ``parts`` alone, so an answer is read against exactly what was sent."""
    number = 0
    described: dict[str, str] = {}  # an entity as shown in full -> where
    blocks = []
    for position, part in enumerate(parts):
        name = block_name(position)
        entities: dict[str, dict[str, str]] = {}
        for letter, entity in zip("AB", part.entities, strict=True):
            data = entity_data(entity)
            key = inert_json(data)
            if "profile" in data and key in described:
                data = {**data, "profile": f"(as in block {described[key]})"}
            described.setdefault(key, name)
            entities[letter] = data
        records = []
        for record in part.records:
            number += 1
            named = {k: v for k, v in record.items() if k != "merged_from"}
            named["relation_id"] = record_name(number)
            records.append(named)
        blocks.append({"block": name, "entities": entities, "records": records})
    return blocks


def part_tokens(part: Part) -> int:
    """A block's size in a pack, in tokens (~4 characters a token), as if it were the
    pack's first block: its profiles in full, its records under short names."""
    return len(inert_json(shown_blocks([part])[0])) // 4


def blocks_json(parts: Sequence[Part]) -> str:
    """The blocks as one fenced JSON array, compact (a pack is read by the model, and its
    size is what packing saves): one line per block head and per record, no indentation.
    Inert as every prompt's data (``prompts.base.inert_json``)."""
    blocks = []
    for data in shown_blocks(parts):
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
    records alone, under the names the request gave them, or why it is invalid; raises
    when the answer is not a list of blocks or no part is valid.

    The names are unique across the request, so a group belongs to the block of its
    records wherever the answer lists it (a small model writes several blocks' groups
    under its first entry); a group whose records lie in two blocks makes both blocks'
    parts invalid (never merged across); a name the request does not hold (a relation id
    included) makes invalid the part of the block its group belongs to (the entry's own
    when the group names no record of the request); a block that no entry answers and no
    group of two or more of its records names is unanswered."""
    if not isinstance(parsed, dict) or not isinstance(parsed.get("blocks"), list):
        raise InvalidAnswerError('the answer needs a "blocks" list, one entry per block')
    names = {block_name(i): i for i in range(len(parts))}
    sent = shown_blocks(parts)
    owner = {
        str(record["relation_id"]): index
        for index, block in enumerate(sent)
        for record in block["records"]
    }
    routed = _Routed(len(parts), owner)
    for position, entry in enumerate(parsed["blocks"]):
        name = entry.get("block") if isinstance(entry, dict) else None
        if not isinstance(name, str) or name.strip() not in names:
            raise InvalidAnswerError(
                f"blocks[{position}] names block {shown(name)}, which is not in the request"
            )
        routed.read(names[name.strip()], name.strip(), entry)
    out: list[ClusterOutcome | InvalidAnswerError] = []
    for index, part in enumerate(parts):
        if index in routed.problems:
            out.append(InvalidAnswerError(f"block {block_name(index)}: {routed.problems[index]}"))
        elif index not in routed.answered:
            out.append(InvalidAnswerError(f"the answer has no entry for block {block_name(index)}"))
        else:
            try:
                out.append(
                    cluster_relations.validate_answer(
                        routed.answers[index], sent[index]["records"], part.canary
                    )
                )
            except InvalidAnswerError as error:
                out.append(InvalidAnswerError(f"block {block_name(index)}: {error}"))
    if all(isinstance(item, InvalidAnswerError) for item in out):
        raise InvalidAnswerError("; ".join(str(item) for item in out)[:2000])
    return out


class _Routed:
    """The answer's groups, unsure groups and relation_list entries, each given to the
    block whose records it names (see :func:`validate_answer`)."""

    def __init__(self, blocks: int, owner: Mapping[str, int]) -> None:
        self.owner = owner
        self.answers: list[dict[str, Any]] = [
            {"relation_list": [], "mapping_table": {}, "unsure": []} for _ in range(blocks)
        ]
        self.answered: set[int] = set()
        self.entries: set[int] = set()
        self.problems: dict[int, str] = {}

    def _blocks_of(self, refs: Sequence[Any]) -> set[int]:
        return {
            self.owner[r.strip()] for r in refs if isinstance(r, str) and r.strip() in self.owner
        }

    def _target(self, index: int, refs: Sequence[Any], where: str) -> int | None:
        """The block a group belongs to (its records' block; the entry's own when it
        names none), or None when it spans blocks (each of them is then invalid). A group
        naming two or more records of a block answers that block; one record's fields, or
        a group of one, do not."""
        blocks = self._blocks_of(refs)
        if len(blocks) > 1:
            spanned = " and ".join(block_name(b) for b in sorted(blocks))
            for block in blocks:
                self.problems.setdefault(
                    block, f"{where} of block {block_name(index)} groups records of {spanned}"
                )
            return None
        target = blocks.pop() if blocks else index
        if len({ref.strip() for ref in refs if isinstance(ref, str)} & self.owner.keys()) > 1:
            self.answered.add(target)  # a group of two or more of its records answers it
        return target

    def read(self, index: int, name: str, entry: dict[str, Any]) -> None:
        if index in self.entries:
            self.problems.setdefault(index, f"block {name} is answered twice")
        self.entries.add(index)
        self.answered.add(index)
        table, unsure, entries = (
            entry.get("mapping_table"),
            entry.get("unsure") or [],
            entry.get("relation_list") or [],
        )
        if not isinstance(table, dict):
            self.problems.setdefault(index, 'the answer needs a "mapping_table" object')
            return
        if not isinstance(unsure, list) or not isinstance(entries, list):
            self.problems.setdefault(index, '"unsure" and "relation_list" must be lists')
            return
        for key, members in table.items():
            if not isinstance(members, list):
                self.problems.setdefault(index, f"mapping_table[{shown(key)}] must be a list")
                continue
            target = self._target(index, [key, *members], f"mapping_table[{shown(key)}]")
            if target is not None:
                self.answers[target]["mapping_table"].setdefault(key, []).extend(members)
        for position, group in enumerate(unsure):
            refs = group if isinstance(group, list) else []
            target = self._target(index, refs, f"unsure[{position}]")
            if target is not None:
                self.answers[target]["unsure"].append(group)
        for item in entries:
            ref = item.get("relation_id") if isinstance(item, dict) else None
            target = self._target(index, [ref], "relation_list")
            if target is not None:
                self.answers[target]["relation_list"].append(item)
