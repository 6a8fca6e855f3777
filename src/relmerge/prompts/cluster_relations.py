"""Task ``relation_cluster``: which records of one block state the same fact (HetaDB style).

Answer: ``{"relation_list": [...], "mapping_table": {canonical: [members]}, "unsure": [[…]]}``.
Keys and members are relation ids (a merged record's ``merged_from`` ids name it too) or
``"Node1||Node2"`` pairs; only groups that merge need be listed, and groups that share a
record are one group. Anything that names an id or an endpoint not in the request is
invalid.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from relmerge.errors import InvalidAnswerError
from relmerge.model import EntityContext, coerce_attributes
from relmerge.prompts.base import (
    DATA_NOT_INSTRUCTIONS,
    answer_tokens,
    check_endpoints,
    feedback_messages,
    fenced_json,
    refuse_truncated,
    shown,
)
from relmerge.prompts.context import RULES, entity_block
from relmerge.providers.base import LLMRequest, Message

_NONE: Mapping[int, int | None] = {}
TASK = "relation_cluster"
VERSION = 2
PROMPT = f"{TASK}@{VERSION}"  # in the cache key and the decision log


class ClusterEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a closed schema: see prompts.base

    relation_id: str | None = Field(None, description="Canonical relation id of the group.")
    Node1: str = Field(description="Source entity name.")
    Node2: str = Field(description="Target entity name.")
    Relation: str = Field(description="Relation name of the merged relation.")
    Type: str = Field(description="Relation type label.")
    Description: str = Field(description="Merged description keeping every distinct detail.")
    Attr: dict[str, str] = Field(default_factory=dict, description="Merged attributes.")
    merge_tag: bool | None = None


class ClusterAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    relation_list: list[ClusterEntry] = Field(default_factory=list)
    mapping_table: dict[str, list[str]] = Field(
        description="Canonical relation id -> relation ids that state the same fact."
    )
    unsure: list[list[str]] = Field(
        default_factory=list, description="Groups the context cannot decide."
    )


SCHEMA: dict[str, Any] = ClusterAnswer.model_json_schema()

SYSTEM_PROMPT = f"""Task: {TASK}
You deduplicate the relations of a knowledge graph. Every record below connects the same
two entities (A and B, described with their profiles). Group the records that state the
SAME FACT.
{RULES}

Answer with one JSON object:
{{"relation_list": [{{"relation_id": "<canonical id>", "Node1": "<source name>",
"Node2": "<target name>", "Relation": "<name>", "Type": "<type>",
"Description": "<one description with every distinct detail>", "Attr": {{}},
"merge_tag": true}}],
"mapping_table": {{"<canonical id>": ["<relation_id>", "<relation_id>", ...]}},
"unsure": [["<relation_id>", "<relation_id>"]]}}
List in mapping_table only groups of two or more records that state one fact; each
relation_id at most once; use only relation_ids of the records. Records you do not list
stay separate. Put a group in "unsure" only when the records and profiles truly cannot
decide; do not use it for clear cases.
{DATA_NOT_INSTRUCTIONS}"""


@dataclass(frozen=True)
class ClusterOutcome:
    """Groups of record indices: to merge (with the fields the model wrote) and unsure."""

    groups: list[list[int]] = field(default_factory=list)
    fields: dict[int, dict[str, Any]] = field(default_factory=dict)  # group index -> fields
    unsure: list[list[int]] = field(default_factory=list)
    # With canary records in the request: the model's groups and unsure groups with them
    # (how it answered the canaries); ``groups`` and ``unsure`` never hold them.
    together: list[list[int]] = field(default_factory=list)
    doubted: list[list[int]] = field(default_factory=list)


def build_request(
    records: Sequence[dict[str, Any]],
    entities: tuple[EntityContext, EntityContext],
    *,
    temperature: float,
    feedback: Sequence[tuple[str, str]] = (),
    max_answer_tokens: int | None = None,
) -> LLMRequest:
    user = (
        f"Records ({len(records)}), each between entity A and entity B:\n"
        + fenced_json(list(records))
        + "\n"
        + entity_block(entities)
    )
    messages = [Message("system", SYSTEM_PROMPT), Message("user", user)]
    messages += feedback_messages(feedback, "Answer again with valid JSON.")
    limit = answer_tokens(TASK, records, max_answer_tokens)
    return LLMRequest(TASK, tuple(messages), SCHEMA, temperature, limit, prompt=PROMPT)


class _Resolver:
    """What an answer's references name: record ids (a merged record's ``merged_from``
    too) and ``"Node1||Node2"`` pairs; ``by_id`` collects the positions named by id."""

    def __init__(self, records: Sequence[dict[str, Any]]) -> None:
        self.by_id = {str(r["relation_id"]): i for i, r in enumerate(records)}
        # A record standing for a merged cluster shows its members' ids: they name it too.
        for i, r in enumerate(records):
            for member in r.get("merged_from") or ():
                self.by_id.setdefault(str(member), i)
        self.by_pair: dict[str, list[int]] = {}
        for i, r in enumerate(records):
            self.by_pair.setdefault(
                f"{r['source_entity_name']}||{r['target_entity_name']}", []
            ).append(i)
        self.names = {r["source_entity_name"] for r in records} | {
            r["target_entity_name"] for r in records
        }
        # Only the entity names the records show; the prompt shows no entity ids.
        self.endpoints = {
            field: self.names
            for field in ("Node1", "Node2", "source_entity_name", "target_entity_name")
        }
        self.named: set[int] = set()  # positions some reference named by id

    def resolve(self, ref: Any, where: str) -> list[int]:
        """Record indices named by ``ref``: an id of the request, or one of its pairs."""
        if not isinstance(ref, str):
            raise InvalidAnswerError(f"{where}: {shown(ref)} is not a relation id")
        ref = ref.strip()
        if ref in self.by_id:
            self.named.add(self.by_id[ref])
            return [self.by_id[ref]]
        if ref in self.by_pair:
            return self.by_pair[ref]
        raise InvalidAnswerError(f"{where} names {shown(ref)}, which is not an input relation")


def _entry_fields(entry: Any, resolver: _Resolver, where: str) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise InvalidAnswerError(f"{where} must be an object")
    check_endpoints(entry, resolver.endpoints, where)
    fields: dict[str, Any] = {}
    for source, target in (("Relation", "name"), ("Type", "type"), ("Description", "description")):
        value = entry.get(source, entry.get(target))
        if not isinstance(value, str) or not value.strip():
            raise InvalidAnswerError(f"LLM output is missing a non-empty {source} field ({where}).")
        fields[target] = value.strip()
    try:
        fields["attributes"] = coerce_attributes(entry.get("Attr", entry.get("attributes")) or {})
    except ValueError as error:
        raise InvalidAnswerError(f"{where}.Attr {error}") from None
    return fields


def _components(groups: list[list[int]], size: int) -> list[list[int]]:
    """Groups that share a record are one group (a model often lists a group once per
    member: ``{"a": ["b", "c"], "b": ["a", "c"]}``), as sorted index lists."""
    parent = list(range(size))

    def find(item: int) -> int:
        while parent[item] != item:
            parent[item] = parent[parent[item]]
            item = parent[item]
        return item

    for group in groups:
        for member in group[1:]:
            parent[find(member)] = find(group[0])
    joined: dict[int, list[int]] = {}
    for group in groups:
        for member in group:
            joined.setdefault(find(member), [])
    for index in range(size):
        if find(index) in joined:
            joined[find(index)].append(index)
    return sorted((sorted(set(g)) for g in joined.values() if len(set(g)) > 1), key=min)


def validate_answer(
    parsed: Any, records: Sequence[dict[str, Any]], canary: Mapping[int, int | None] = _NONE
) -> ClusterOutcome:
    """Read an answer tolerantly, never beyond its request: groups that share a record
    are joined; a record a group and an ``unsure`` group both hold is unsure (not
    merged); any id, pair or endpoint not in the request is invalid.

    ``canary``: positions of canary records (``relmerge.decide.canary_mix``), each with
    the real record it repeats word for word, if any. They join no group of real records
    (a canary cannot bridge two of them), and how the model grouped them is in
    ``together`` and ``doubted`` (a ``"Node1||Node2"`` pair names every record between
    them, canaries too). A group the model mixed another one into writes no fields when
    it named that canary by id, or when its text borrows words of the canary's that no
    real record of the request has: its text is then not the group's (see
    :func:`_borrows`). A group keyed by its entity pair keeps the model's text."""
    if not isinstance(parsed, dict):
        raise InvalidAnswerError("the answer is not a JSON object")
    table = parsed.get("mapping_table")
    if not isinstance(table, dict):
        raise InvalidAnswerError('the answer needs a "mapping_table" object')
    resolver = _Resolver(records)
    size = len(records)
    listed: list[list[int]] = []
    keys: list[str] = []
    for key, members in table.items():
        where = f"mapping_table[{shown(key)}]"
        if not isinstance(members, list):
            raise InvalidAnswerError(f"{where} must be a list")
        group = list(dict.fromkeys(resolver.resolve(key, where)))
        for member in members:
            group += [i for i in resolver.resolve(member, where) if i not in group]
        listed.append(group)
        keys.append(str(key).strip())
    unsure_raw = parsed.get("unsure") or []
    if not isinstance(unsure_raw, list):
        raise InvalidAnswerError('"unsure" must be a list of lists of relation ids')
    unsure: list[list[int]] = []
    for position, group in enumerate(unsure_raw):
        if not isinstance(group, list):
            raise InvalidAnswerError(f"unsure[{position}] must be a list")
        members = sorted({i for ref in group for i in resolver.resolve(ref, f"unsure[{position}]")})
        if len(members) > 1:
            unsure.append(members)
    together = _components(listed, size) if canary else []
    real_unsure = [[i for i in group if i not in canary] for group in unsure]
    outcome = ClusterOutcome(
        unsure=_components(real_unsure, size),
        together=together,
        doubted=_components(unsure, size) if canary else [],
    )
    real_listed = [[i for i in group if i not in canary] for group in listed]
    for component in _components(real_listed, size):
        # Two records the model both merged and called unsure: unsure wins for them.
        doubted = {
            i for group in real_unsure if len(set(group) & set(component)) > 1 for i in group
        }
        kept = [i for i in component if i not in doubted]
        if len(kept) > 1:
            outcome.groups.append(kept)
    _read_fields(parsed, resolver, outcome, keys, real_listed, canary, records)
    return outcome


_WORD = re.compile(r"[^\W\d_]{4,}|\d+|[\u3400-\u9fff\uf900-\ufaff]{2}")


def _words(text: str) -> set[str]:
    """Words (four letters or more), numbers, and pairs of CJK characters: what a text
    borrowed from another shows of it, in any language."""
    text = text.casefold()
    cjk = re.findall(r"[\u3400-\u9fff\uf900-\ufaff]+", text)
    pairs = {run[i : i + 2] for run in cjk for i in range(len(run) - 1)}
    return {w for w in _WORD.findall(text) if not w[0] >= "\u3400"} | pairs


def _borrows(text: str, foreign: list[str], real: list[str]) -> bool:
    """Whether ``text`` (a merged description) shows words of a ``foreign`` canary text
    that no ``real`` record of the request has: a number, or two words."""
    own = set().union(*(_words(t) for t in real)) if real else set()
    written = _words(text)
    for other in foreign:
        borrowed = (_words(other) - own) & written
        if any(w.isdigit() for w in borrowed) or len(borrowed) >= 2:
            return True
    return False


def _read_fields(
    parsed: dict[str, Any],
    resolver: _Resolver,
    outcome: ClusterOutcome,
    keys: list[str],
    real_listed: list[list[int]],
    canary: Mapping[int, int | None],
    records: Sequence[dict[str, Any]],
) -> None:
    """The fields the model wrote for each merged group, into ``outcome.fields``: none
    for a group it mixed a canary into that repeats none of its records, when it named
    that canary by id or its text borrows the canary's words."""
    foreign: dict[int, set[int]] = {}  # real group position -> canaries mixed into it
    for group in outcome.together:
        strangers = {c for c in canary if c in group and canary[c] not in group}
        for position, merged in enumerate(outcome.groups):
            if strangers and set(merged) <= set(group):
                foreign[position] = strangers
    real_texts = [str(r.get("description", "")) for i, r in enumerate(records) if i not in canary]

    def taints(position: int, description: str) -> bool:
        strangers = foreign.get(position, set())
        if strangers & resolver.named:
            return True
        texts = [str(records[c].get("description", "")) for c in strangers]
        return bool(texts) and _borrows(description, texts, real_texts)

    key_to_group = {
        key: position
        for key, group in zip(keys, real_listed, strict=True)
        for position, merged in enumerate(outcome.groups)
        if set(group) & set(merged)
    }
    entries = parsed.get("relation_list") or []
    if not isinstance(entries, list):
        raise InvalidAnswerError('"relation_list" must be a list')
    for position, entry in enumerate(entries):
        where = f"relation_list[{position}]"
        fields = _entry_fields(entry, resolver, where)
        ref = entry.get("relation_id") or f"{entry.get('Node1')}||{entry.get('Node2')}"
        referenced = set(resolver.resolve(ref, where))
        if referenced <= canary.keys():
            continue  # about a canary record: its fields are nobody's
        for key, group_index in key_to_group.items():
            if key == ref or referenced & set(outcome.groups[group_index]):
                if taints(group_index, fields["description"]):
                    continue
                refuse_truncated(fields["description"], where)
                outcome.fields.setdefault(group_index, fields)
