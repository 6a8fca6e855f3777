"""Handlers for :class:`LLMServer` that answer from gold clusters, and the dev set's
gold judge.

``gold_merge_handler`` answers ``relation_merge`` by relation id: records of one gold
cluster are fused; a batch that spans clusters is split along them; ids the gold file
does not know (intermediate merges) form their own part. It needs no recognition by
text: ``relation_merge`` requests are never packed, so they show the records' own ids.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from relmerge.eval.gold import labelled_relations, load_gold
from relmerge.eval.gold_judge import GoldJudge, gold_fields, task_of
from tests.support.llm_server import Reply, json_reply, request_records


def dev_gold_judge(dev: Path, error_rate: float = 0.0) -> GoldJudge:
    """The gold judge of a dev-style folder: its ``gold.jsonl`` labels, and its
    ``relations.jsonl`` to recognise records a request shows under other ids."""
    gold = dev / "gold.jsonl"
    return GoldJudge(load_gold(gold), error_rate, records=labelled_relations(gold))


def gold_merge_handler(gold: dict[str, str]) -> Callable[[dict[str, Any]], Reply]:
    def handle(body: dict[str, Any]) -> Reply:
        records = request_records(body) or []
        parts: dict[str, list[dict[str, Any]]] = {}
        for item in records:
            cluster = gold.get(item["relation_id"], "unknown:" + item["relation_id"])
            parts.setdefault(cluster, []).append(item)

        fields = gold_fields
        if len(parts) == 1:
            return json_reply({"relation": fields(records[0])})
        return json_reply(
            {
                "relations": [
                    {**fields(members[0]), "relation_ids": [m["relation_id"] for m in members]}
                    for members in parts.values()
                ]
            }
        )

    return handle


def gold_task_handler(judge: GoldJudge) -> Callable[[dict[str, Any]], Reply]:
    """Serve a :class:`GoldJudge` over the loopback server: all three tasks."""

    def handle(body: dict[str, Any]) -> Reply:
        schema = (body.get("response_format") or {}).get("json_schema") or {}
        task = schema.get("name")
        if not isinstance(task, str):
            system = next(
                (
                    m.get("content", "")
                    for m in body.get("messages", [])
                    if m.get("role") == "system"
                ),
                "",
            )
            task = task_of(system) or "relation_cluster"
        return json_reply(judge.answer(task, request_records(body) or []))

    return handle
