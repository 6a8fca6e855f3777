"""``GoldJudge``: a model that answers the tasks from gold clusters, with noise.

It lets routing, cost and clustering be measured without a paid LLM: with
``error_rate=p`` a judge verdict flips with probability p, and in cluster/merge answers
each record lands in a wrong group, and each pair of groups is wrongly merged, with
probability p. Answers are deterministic for a given request and seed.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

import orjson

from relmerge.normalize import normalize_description
from relmerge.prompts.base import TRUNCATED
from relmerge.providers.base import LLMRequest, LLMResult, Usage
from relmerge.providers.fake import request_records
from relmerge.providers.parsing import parse_json_answer

_TASK_LINE = re.compile(r"^Task: (\w+)", re.MULTILINE)
_FIELDS = ("type", "name", "description", "attributes")


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


def task_of(body_or_prompt: str) -> str | None:
    match = _TASK_LINE.search(body_or_prompt)
    return match.group(1) if match else None


class GoldJudge:
    available = True

    def __init__(
        self,
        gold: Mapping[str, str],
        error_rate: float = 0.0,
        seed: int = 0,
        name: str = "gold-judge",
    ) -> None:
        self.gold = dict(gold)
        self.error_rate = error_rate
        self.seed = seed
        self.name = name
        self.calls = 0

    def _cluster(self, record: dict[str, Any]) -> str:
        ids = [str(record.get("relation_id"))] + [str(i) for i in record.get("merged_from", [])]
        known = [self.gold[i] for i in ids if i in self.gold]
        if not known:
            return "unknown:" + ids[0]
        return Counter(known).most_common(1)[0][0]

    def _rng(self, task: str, records: list[dict[str, Any]]) -> random.Random:
        key = "|".join([task, str(self.seed), *sorted(str(r.get("relation_id")) for r in records)])
        return random.Random(int(hashlib.sha256(key.encode()).hexdigest()[:16], 16))

    def _labels(self, records: list[dict[str, Any]]) -> list[str]:
        """Gold clusters of ``records``; a record gold does not know that repeats another
        record of the request word for word (a canary copy) is of that one's cluster."""
        labels = [self._cluster(r) for r in records]
        content = [
            orjson.dumps(
                {k: v for k, v in r.items() if k != "relation_id"}, option=orjson.OPT_SORT_KEYS
            )
            for r in records
        ]
        for i, label in enumerate(labels):
            if label.startswith("unknown:"):
                twin = next(
                    (j for j in range(len(records)) if j != i and content[j] == content[i]), None
                )
                if twin is not None:  # known, or as unknown as it: the same fact
                    labels[i] = labels[twin]
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

    def answer(self, task: str, records: list[dict[str, Any]]) -> dict[str, Any]:
        if task == "relation_cluster_many":  # records: the blocks, each answered alone
            return {
                "blocks": [
                    {"block": block["block"], **self.answer("relation_cluster", block["records"])}
                    for block in records
                ]
            }
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
