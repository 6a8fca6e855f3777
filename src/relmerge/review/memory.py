"""Where a person's answers are kept: in memory, and appended to a JSONL file.

The pair key (what a question is about) is the kernel's: ``relmerge.decide.memory``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from relmerge.decide.memory import ANSWERS, Answer, pair_key
from relmerge.prompts.context import EntityContext

__all__ = ["ANSWERS", "Answer", "AnswerMemory", "entities_of", "memory_from_answers", "pair_key"]


class AnswerMemory:
    """Pair answers in memory, optionally persisted to a JSONL file (appended)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._answers: dict[str, Answer] = {}
        self._torn_tail = False
        if path is not None and path.is_file():
            data = path.read_bytes()
            # A process killed mid-append leaves a torn last line: skip it, and start the
            # next answer on a fresh line so that it is not glued to the torn one.
            self._torn_tail = bool(data) and not data.endswith(b"\n")
            for line in data.splitlines():
                try:
                    item = orjson.loads(line) if line.strip() else None
                except orjson.JSONDecodeError:
                    continue
                if not isinstance(item, dict) or not isinstance(item.get("key"), str):
                    continue
                if item.get("answer") in ANSWERS:
                    self._answers[item["key"]] = item["answer"]

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: str) -> Answer | None:
        return self._answers.get(key)

    def remember(self, key: str, answer: Answer, **extra: Any) -> None:
        if self._answers.get(key) == answer:
            return
        self._answers[key] = answer
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            line = orjson.dumps({"key": key, "answer": answer, **extra}) + b"\n"
            with self.path.open("ab") as handle:
                handle.write(b"\n" + line if self._torn_tail else line)
            self._torn_tail = False

    def remember_group(
        self,
        records: Sequence[Mapping[str, Any]],
        entities: Sequence[EntityContext],
        answer: Answer,
        **extra: Any,
    ) -> None:
        """A group answer holds for every pair of the group."""
        for i, a in enumerate(records):
            for b in records[i + 1 :]:
                self.remember(pair_key(a, b, entities), answer, **extra)


def entities_of(item: Mapping[str, Any]) -> list[EntityContext]:
    """The entity context stored in a clarification item."""
    return [
        EntityContext(e["entity_id"], e["name"], e.get("profile"), e.get("type"))
        for e in item.get("context", {}).get("entities", [])
    ]


def memory_from_answers(
    clarifications: Iterable[Mapping[str, Any]],
    answers: Mapping[str, Answer],
    memory: AnswerMemory | None = None,
) -> AnswerMemory:
    """Pair answers from a run's answered clarifications (``answers``: id → answer), added
    to ``memory`` (a new in-memory one by default)."""
    memory = memory if memory is not None else AnswerMemory()
    for item in clarifications:
        answer = answers.get(item["id"])
        if answer in ANSWERS:
            memory.remember_group(item["records"], entities_of(item), answer)
    return memory
