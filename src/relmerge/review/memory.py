"""Where a person's answers are kept: in memory, and appended to a JSONL file.

The pair key (what a question is about) is the kernel's: ``relmerge.decide.memory``. Each
line is ``{"key", "answer"}``, the last line of a key wins; a line may name the question
it answers (``id``: a review answer, see ``ReviewQueue.memory``), and ``"answer": null``
forgets the key. So revising and forgetting only ever append, as remembering does.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from relmerge.decide.memory import ANSWERS, Answer, pair_key
from relmerge.model import EntityContext

__all__ = [
    "ANSWERS",
    "Answer",
    "AnswerMemory",
    "entities_of",
    "group_keys",
    "memory_from_answers",
    "pair_key",
]


class AnswerMemory:
    """Pair answers in memory, optionally persisted to a JSONL file (appended)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._answers: dict[str, Answer] = {}
        self._questions: dict[str, str | None] = {}  # key → id of the question it answers
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
                key, answer, question = item["key"], item.get("answer"), item.get("id")
                if answer in ANSWERS:
                    self._answers[key] = answer
                    self._questions[key] = question if isinstance(question, str) else None
                elif answer is None and "answer" in item:  # forgotten
                    self._answers.pop(key, None)
                    self._questions.pop(key, None)

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: str) -> Answer | None:
        return self._answers.get(key)

    def question_of(self, key: str) -> str | None:
        """The id of the question whose answer decided ``key`` (None: not on record)."""
        return self._questions.get(key)

    def remembered_keys(self) -> list[str]:
        """The pair keys that have an answer."""
        return list(self._answers)

    def remember(self, key: str, answer: Answer, **extra: Any) -> None:
        """Remember ``answer`` for ``key``; ``id=`` names the question it answers (written
        again when another question now gives the same answer, so that forgetting the
        first one leaves it)."""
        question = extra.get("id") if isinstance(extra.get("id"), str) else None
        if self._answers.get(key) == answer and question in (None, self._questions.get(key)):
            return
        self._answers[key] = answer
        self._questions[key] = question
        self._append({"key": key, "answer": answer, **extra})

    def forget(self, key: str) -> None:
        """Drop the answer for ``key``: the pair is asked again."""
        if key not in self._answers:
            return
        del self._answers[key]
        self._questions.pop(key, None)
        self._append({"key": key, "answer": None})

    def forget_all(self) -> int:
        """Drop every answer (the file is emptied); how many there were."""
        count = len(self._answers)
        self._answers.clear()
        self._questions.clear()
        if self.path is not None and self.path.exists():
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(b"")
            os.replace(tmp, self.path)
            self._torn_tail = False
        return count

    def _append(self, item: dict[str, Any]) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = orjson.dumps(item) + b"\n"
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
        for key in group_keys(records, entities):
            self.remember(key, answer, **extra)


def group_keys(
    records: Sequence[Mapping[str, Any]], entities: Sequence[EntityContext]
) -> list[str]:
    """The pair keys a group answer decides: every pair of the group."""
    return [pair_key(a, b, entities) for i, a in enumerate(records) for b in records[i + 1 :]]


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
