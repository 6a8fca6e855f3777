"""The review queue of a run directory: ``clarifications.jsonl`` + ``answers.jsonl``.

Questions come from the run; answers (``{"id", "answer"}``, one line each, last one wins)
are written by ``relmerge review`` or by an app, and applied by the next run into the
same directory. Each save rewrites ``answers.jsonl`` atomically, so two processes never see
half a file and a crash loses at most the answer being typed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from relmerge.errors import InputError
from relmerge.io.load import read_jsonl_items
from relmerge.review.memory import ANSWERS, Answer, AnswerMemory, memory_from_answers

CLARIFICATIONS_FILE = "clarifications.jsonl"
ANSWERS_FILE = "answers.jsonl"
MEMORY_FILE = "answer_memory.jsonl"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [item for _, item in read_jsonl_items(path, path.name) if isinstance(item, dict)]


class ReviewQueue:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.questions = _read_jsonl(self.root / CLARIFICATIONS_FILE)
        self.answers: dict[str, Answer] = {}
        for item in _read_jsonl(self.root / ANSWERS_FILE):
            if item.get("answer") in ANSWERS and isinstance(item.get("id"), str):
                self.answers[item["id"]] = item["answer"]

    def add(self, question: dict[str, Any]) -> None:
        """Add a question (from the judge API or a clarifier) unless it is already there."""
        if any(q["id"] == question["id"] for q in self.questions):
            return
        self.questions.append(question)
        self.root.mkdir(parents=True, exist_ok=True)
        _write_atomic(
            self.root / CLARIFICATIONS_FILE,
            b"".join(orjson.dumps(q) + b"\n" for q in self.questions),
        )

    def pending(self) -> list[dict[str, Any]]:
        return [q for q in self.questions if q["id"] not in self.answers]

    def question(self, question_id: str) -> dict[str, Any]:
        for question in self.questions:
            if question["id"] == question_id:
                return question
        raise InputError(f"no pending question {question_id!r} in {self.root}")

    def answer(self, question_id: str, answer: str) -> None:
        if answer not in ANSWERS:
            raise InputError(f"an answer is 'merge' or 'keep_both', not {answer!r}")
        self.question(question_id)
        self.answers[question_id] = answer  # type: ignore[assignment]
        self._save()

    def undo(self, question_id: str) -> None:
        self.answers.pop(question_id, None)
        self._save()

    def memory(self, into: AnswerMemory | None = None) -> AnswerMemory:
        """The answered questions as pair answers, added to ``into`` when given."""
        return memory_from_answers(self.questions, self.answers, into)

    def _save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        _write_atomic(
            self.root / ANSWERS_FILE,
            b"".join(
                orjson.dumps({"id": key, "answer": value}) + b"\n"
                for key, value in self.answers.items()
            ),
        )


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
