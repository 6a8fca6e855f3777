"""``GoldJudge``: a model that answers the tasks from gold clusters, with noise.

It lets routing, cost and clustering be measured without a paid LLM: with
``error_rate=p`` a judge verdict flips with probability p, and in cluster/merge answers
each record lands in a wrong group, and each pair of groups is wrongly merged, with
probability p. Answers are deterministic for a given request and seed.

A record is recognised by its relation id (and a merged record's ``merged_from`` ids).
A request may show records under other ids (a packed request shows short aliases, ``r1``,
``r2``, …, without ``merged_from``), so a judge given the labelled ``records`` also
recognises a shown record by its text: each line of its description (a merged record's is
its members' distinct descriptions joined, one a line, the whole maybe cut) against the
lines of the labelled descriptions; a cut last line by prefix. Where one text is in
records of several labels, the endpoint names and then the name shown decide. A record
whose text is in no labelled record (a made-up canary) stays unknown. A packed block's
records are read by their text alone: its names are the request's own, and ``r1`` may
also be a labelled id of another record.
"""

from __future__ import annotations

import bisect
import hashlib
import random
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from relmerge.normalize import normalize_description, normalize_key_text
from relmerge.prompts.base import TRUNCATED
from relmerge.providers.base import LLMRequest, LLMResult, Usage
from relmerge.providers.fake import request_records
from relmerge.providers.parsing import parse_json_answer

_TASK_LINE = re.compile(r"^Task: (\w+)", re.MULTILINE)
_FIELDS = ("type", "name", "description", "attributes")
_SHOWN = "\x00shown:"  # marks a packed request's own record names: no labelled id has it


def gold_fields(record: Mapping[str, Any], *others: Mapping[str, Any]) -> dict[str, Any]:
    """A group's semantic fields as a careful model would write them: the first record's,
    with every record's distinct description kept, without the marker the prompt puts on
    a shortened description."""
    fields = {key: record[key] for key in _FIELDS}
    texts: dict[str, str] = {}  # comparison form -> text, first seen wins
    for item in (record, *others):
        for part in item["description"].replace(f" {TRUNCATED}", "").split("\n"):
            texts.setdefault(normalize_description(part), part.strip())
    fields["description"] = "\n".join(text for form, text in texts.items() if form)
    return fields


_MARK = f" {TRUNCATED}"
PREFIX_CHARS = 20  # a cut last line shorter than this matches by equality only


def _shown_lines(description: str) -> tuple[list[str], bool]:
    """A shown description's lines in comparison form, and whether it was cut."""
    cut = description.endswith(_MARK)
    if cut:
        description = description[: -len(_MARK)]
    return [normalize_description(part) for part in description.split("\n")], cut


def _ends(record: Mapping[str, Any]) -> tuple[str, str]:
    return (
        normalize_key_text(str(record.get("source_entity_name") or "")),
        normalize_key_text(str(record.get("target_entity_name") or "")),
    )


class ContentIndex:
    """Labelled records by the lines of their descriptions: the gold label of a shown
    record whose ids gold does not know (see the module)."""

    def __init__(self, records: Iterable[Mapping[str, Any]], gold: Mapping[str, str]) -> None:
        # (label, endpoint names, name) of each labelled record, in input order
        self.records: list[tuple[str, tuple[str, str], str]] = []
        by_line: dict[str, list[int]] = {}
        for record in records:
            label = gold.get(str(record.get("relation_id")))
            if label is None:
                continue
            index = len(self.records)
            name = normalize_key_text(str(record.get("name") or ""))
            self.records.append((label, _ends(record), name))
            for part in str(record.get("description") or "").split("\n"):
                line = normalize_description(part)
                if line and index not in by_line.setdefault(line, []):
                    by_line[line].append(index)
        self.by_line = by_line
        self.sorted_lines = sorted(by_line)

    def _matches(self, line: str, prefix: bool) -> list[int]:
        if not prefix:
            return list(self.by_line.get(line, ()))
        found: set[int] = set()
        at = bisect.bisect_left(self.sorted_lines, line)
        while at < len(self.sorted_lines) and self.sorted_lines[at].startswith(line):
            found.update(self.by_line[self.sorted_lines[at]])
            at += 1
        return sorted(found)

    def _resolve(self, matched: list[int], shown: Mapping[str, Any]) -> str:
        """One line's label: where its records carry several, those of the shown endpoint
        names win, then those of the shown name; then the most common (first on a tie)."""
        if len({self.records[i][0] for i in matched}) > 1:
            ends = _ends(shown)
            same_ends = [i for i in matched if self.records[i][1] == ends]
            matched = same_ends or matched
            name = normalize_key_text(str(shown.get("name") or ""))
            same_name = [i for i in matched if self.records[i][2] == name]
            matched = same_name or matched
        return Counter(self.records[i][0] for i in matched).most_common(1)[0][0]

    def label(self, shown: Mapping[str, Any]) -> str | None:
        """The label most lines of ``shown``'s description vote for (the first line's on a
        tie), or None when no line is in a labelled record."""
        lines, cut = _shown_lines(str(shown.get("description") or ""))
        votes: Counter[str] = Counter()
        for position, line in enumerate(lines):
            if not line:
                continue
            prefix = cut and position == len(lines) - 1 and len(line) >= PREFIX_CHARS
            matched = self._matches(line, prefix)
            if matched:
                votes[self._resolve(matched, shown)] += 1
        return votes.most_common(1)[0][0] if votes else None


def task_of(body_or_prompt: str) -> str | None:
    match = _TASK_LINE.search(body_or_prompt)
    return match.group(1) if match else None


class GoldJudge:
    """Answers from ``gold`` (relation id -> cluster); with ``records`` (the labelled
    relations: ``relation_id``, ``description``, ``name``, endpoint names) it also
    recognises shown records by their text, as a packed request shows them.

        gold = dev / "gold.jsonl"  # eval.gold: labels, and the relations beside them
        judge = GoldJudge(load_gold(gold), records=labelled_relations(gold))
    """

    available = True

    def __init__(
        self,
        gold: Mapping[str, str],
        error_rate: float = 0.0,
        seed: int = 0,
        name: str = "gold-judge",
        *,
        records: Iterable[Mapping[str, Any]] | None = None,
    ) -> None:
        self.gold = dict(gold)
        self.error_rate = error_rate
        self.seed = seed
        self.name = name
        self.calls = 0
        self.content = None if records is None else ContentIndex(records, self.gold)

    def _known(self, record: Mapping[str, Any]) -> str | None:
        """The most common gold label of the record's ids, or None when gold knows none."""
        ids = [str(record.get("relation_id"))] + [str(i) for i in record.get("merged_from", [])]
        known = [self.gold[i] for i in ids if i in self.gold]
        return Counter(known).most_common(1)[0][0] if known else None

    def _by_content(self, record: Mapping[str, Any]) -> str | None:
        return None if self.content is None else self.content.label(record)

    def _cluster(self, record: dict[str, Any]) -> str:
        label = self._known(record)
        if label is None:
            label = self._by_content(record)
        return label if label is not None else "unknown:" + str(record.get("relation_id"))

    def _rng(self, task: str, records: list[dict[str, Any]]) -> random.Random:
        key = "|".join([task, str(self.seed), *sorted(str(r.get("relation_id")) for r in records)])
        return random.Random(int(hashlib.sha256(key.encode()).hexdigest()[:16], 16))

    def _labels(self, records: list[dict[str, Any]]) -> list[str]:
        """Gold clusters of ``records``; a record gold does not know that repeats another
        record of the request word for word (a canary copy) is of that one's cluster. With
        ``records`` labelled, such a copy of a known record takes its label before its own
        text is looked up (the same answer however many records share that text)."""
        known = [self._known(r) for r in records]
        content = [
            orjson.dumps(
                {k: v for k, v in r.items() if k != "relation_id"}, option=orjson.OPT_SORT_KEYS
            )
            for r in records
        ]
        alike: dict[bytes, list[int]] = {}
        for i, data in enumerate(content):
            alike.setdefault(data, []).append(i)
        # each record's first word-for-word twin in the request, if any
        twins = [next((j for j in alike[data] if j != i), None) for i, data in enumerate(content)]
        if self.content is not None:
            for i, twin in enumerate(twins):
                if known[i] is None and twin is not None and known[twin] is not None:
                    known[i] = known[twin]
            known = [
                self._by_content(r) if label is None else label
                for label, r in zip(known, records, strict=True)
            ]
        labels = [
            label if label is not None else "unknown:" + str(r.get("relation_id"))
            for label, r in zip(known, records, strict=True)
        ]
        for i, label in enumerate(labels):
            twin = twins[i]
            if label.startswith("unknown:") and twin is not None:
                labels[i] = labels[twin]  # known, or as unknown as it: the same fact
        return labels

    def _groups(self, records: list[dict[str, Any]], rng: random.Random) -> list[list[int]]:
        labels = self._labels(records)
        p = self.error_rate
        if p > 0:
            for i in range(len(labels)):
                if rng.random() < p:
                    labels[i] = rng.choice(labels) if rng.random() < 0.5 else f"noise:{i}"
        groups: dict[str, list[int]] = {}
        for i, label in enumerate(labels):
            groups.setdefault(label, []).append(i)
        result = list(groups.values())
        if p > 0:
            merged: list[list[int]] = []
            for group in result:
                if merged and rng.random() < p:
                    rng.choice(merged).extend(group)
                else:
                    merged.append(group)
            result = merged
        return result

    def _block(self, block: Mapping[str, Any]) -> dict[str, Any]:
        """A packed block's part: its records carry the request's own names (``r1``, …),
        never relation ids, so they are read by their text alone (a name that happens to
        be a labelled id, as ``r1`` may be, names nothing). The noise is drawn from the
        block's text too: every pack names its records from ``r1`` on."""
        names: dict[str, str] = {}
        shown = []
        for record in block["records"]:
            text = orjson.dumps(
                {k: v for k, v in record.items() if k != "relation_id"}, option=orjson.OPT_SORT_KEYS
            )
            inner = f"{_SHOWN}{hashlib.sha256(text).hexdigest()[:12]}:{record.get('relation_id')}"
            names[inner] = str(record.get("relation_id"))
            shown.append({**record, "relation_id": inner})
        part = self.answer("relation_cluster", shown)
        return {
            "block": block["block"],
            "relation_list": [
                {**entry, "relation_id": names[entry["relation_id"]]}
                for entry in part["relation_list"]
            ],
            "mapping_table": {
                names[key]: [names[member] for member in members]
                for key, members in part["mapping_table"].items()
            },
        }

    def answer(self, task: str, records: list[dict[str, Any]]) -> dict[str, Any]:
        if task == "relation_cluster_many":  # records: the blocks, each answered alone
            return {"blocks": [self._block(block) for block in records]}
        rng = self._rng(task, records)
        if task == "relation_judge":
            candidate = next(r for r in records if r.get("role") == "candidate")
            existing = [r for r in records if r.get("role") == "existing"]
            target = self._cluster(candidate)
            match = next((r for r in existing if self._cluster(r) == target), None)
            merge = match is not None
            if rng.random() < self.error_rate:
                merge = not merge
                match = match or (existing[0] if existing else None)
            return {
                "verdict": "merge" if merge and match else "keep_both",
                "reason": "gold clusters",
                "duplicate_of": match["relation_id"] if merge and match else None,
            }
        groups = self._groups(records, rng)
        if task == "relation_merge":
            if len(groups) == 1:
                return {"relation": gold_fields(*records)}
            return {
                "relations": [
                    {
                        **gold_fields(*(records[i] for i in g)),
                        "relation_ids": [records[i]["relation_id"] for i in g],
                    }
                    for g in groups
                ]
            }
        multi = [g for g in groups if len(g) > 1]
        return {
            "relation_list": [
                {
                    "relation_id": records[g[0]]["relation_id"],
                    "Node1": records[g[0]]["source_entity_name"],
                    "Node2": records[g[0]]["target_entity_name"],
                    "Relation": records[g[0]]["name"],
                    "Type": records[g[0]]["type"],
                    "Description": gold_fields(*(records[i] for i in g))["description"],
                    "Attr": records[g[0]].get("attributes", {}),
                    "merge_tag": True,
                }
                for g in multi
            ],
            "mapping_table": {
                records[g[0]]["relation_id"]: [records[i]["relation_id"] for i in g] for g in multi
            },
        }

    async def invoke(self, request: LLMRequest) -> LLMResult:
        self.calls += 1
        answer = self.answer(request.task, request_records(request))
        text = orjson.dumps(answer).decode()
        prompt_chars = sum(len(message.content) for message in request.messages)
        return LLMResult(
            text=text,
            parsed=parse_json_answer(text),
            model=self.name,
            usage=Usage(prompt_tokens=prompt_chars // 4, completion_tokens=len(text) // 4),
        )
