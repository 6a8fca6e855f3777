"""The review queue of a run directory: ``clarifications.jsonl`` + ``answers.jsonl``.

Questions come from the run; answers (``{"id", "answer"}``, one line each, last one wins)
are written by ``relmerge review`` or by an app, and applied by the next run into the
same directory. Each save rewrites ``answers.jsonl`` atomically, so two processes never see
half a file and a crash loses at most the answer being typed.

``answers.jsonl`` is the record of what a person said in this directory: each line keeps a
copy of its question (``question``) and when it was given (``at``, seconds since the
epoch), because the next run replaces ``clarifications.jsonl`` and a person may want to
see, revise or forget the answer after that. ``answer_memory.jsonl`` applies the answers
by pair content, so an answer still applies after the run that asked it was replaced; it
follows ``answers.jsonl`` (:meth:`ReviewQueue.memory`): a revised answer replaces the
remembered one, and an answer no longer in ``answers.jsonl`` (forgotten, its line or the
file deleted) is forgotten by the memory too.
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path
from typing import Any

import orjson

from relmerge.errors import InputError
from relmerge.io.load import read_jsonl_items
from relmerge.review.memory import ANSWERS, Answer, AnswerMemory, entities_of, group_keys

CLARIFICATIONS_FILE = "clarifications.jsonl"
ANSWERS_FILE = "answers.jsonl"
MEMORY_FILE = "answer_memory.jsonl"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [item for _, item in read_jsonl_items(path, path.name) if isinstance(item, dict)]


class ReviewQueue:
    """The last run's questions (``questions``) and every answer given in ``root``
    (``answers``, oldest first, with ``copies`` of the questions they answered)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.questions = _read_jsonl(self.root / CLARIFICATIONS_FILE)
        self.answers: dict[str, Answer] = {}
        self.copies: dict[str, dict[str, Any]] = {}
        self.answered_at: dict[str, float] = {}
        self._copied: set[str] = set()  # ids whose line in the file holds its question
        for item in _read_jsonl(self.root / ANSWERS_FILE):
            question_id, answer = item.get("id"), item.get("answer")
            if answer not in ANSWERS or not isinstance(question_id, str):
                continue
            self.answers.pop(question_id, None)  # the latest answer goes last
            self.answers[question_id] = answer
            if isinstance(item.get("question"), dict):
                self.copies[question_id] = item["question"]
                self._copied.add(question_id)
            if isinstance(item.get("at"), int | float):
                self.answered_at[question_id] = float(item["at"])

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

    def known(self, question_id: str) -> dict[str, Any] | None:
        """The question ``question_id``: the last run's, or the copy kept with its answer."""
        for question in self.questions:
            if question["id"] == question_id:
                return question
        return self.copies.get(question_id)

    def question(self, question_id: str) -> dict[str, Any]:
        question = self.known(question_id)
        if question is None:
            raise InputError(f"no question {question_id!r} in {self.root}")
        return question

    def to_review(self, revise: bool = False) -> list[dict[str, Any]]:
        """The questions to go through: those pending, or with ``revise`` the answered
        ones first (oldest answer first), then those pending."""
        if not revise:
            return self.pending()
        answered = [self.known(i) for i in self.answers]
        return [*(q for q in answered if q is not None), *self.pending()]

    def answer(self, question_id: str, answer: str, at: float | None = None) -> None:
        """Save ``answer`` (given now, or ``at`` when put back by an undo)."""
        if answer not in ANSWERS:
            raise InputError(f"an answer is 'merge' or 'keep_both', not {answer!r}")
        self.copies[question_id] = self.question(question_id)
        self.answers.pop(question_id, None)  # a revised answer is the latest
        self.answers[question_id] = answer  # type: ignore[assignment]
        self.answered_at[question_id] = time.time() if at is None else at
        self._save()

    def undo(self, question_id: str) -> None:
        self.answers.pop(question_id, None)
        self.answered_at.pop(question_id, None)
        self._save()

    def forget(self, question_ids: list[str]) -> None:
        """Drop these answers (all or none): their questions are asked again."""
        unknown = [i for i in question_ids if i not in self.answers]
        if unknown:
            raise InputError(
                f"no answer to {unknown[0]!r} in {self.root}: "
                f"`relmerge review {shlex.quote(str(self.root))} --revise` shows the answered "
                "questions' ids"
            )
        for question_id in question_ids:
            self.answers.pop(question_id)
            self.answered_at.pop(question_id, None)
        self._save()

    def forget_all(self) -> int:
        """Drop every answer; how many there were."""
        count = len(self.answers)
        self.answers.clear()
        self.answered_at.clear()
        self._save()
        return count

    def given_since(self, moment: float | None) -> int:
        """Answers given (or revised) after ``moment``: what no run has applied yet."""
        if moment is None:
            return len(self.answers)
        return sum(1 for i in self.answers if self.answered_at.get(i, 0.0) > moment)

    def memory(self, into: AnswerMemory | None = None) -> AnswerMemory:
        """Bring ``into`` (a new in-memory one by default) in line with the answers: the
        pairs of an answer no longer given are forgotten, and every answered question's
        pairs take its answer (the latest answer wins where two questions share a pair)."""
        memory = into if into is not None else AnswerMemory()
        for key in memory.remembered_keys():
            question_id = memory.question_of(key)
            if question_id is not None and question_id not in self.answers:
                memory.forget(key)
        wanted: dict[str, tuple[Answer, str]] = {}
        for question_id, answer in self.answers.items():
            question = self.known(question_id)
            if question is not None:
                for key in group_keys(question["records"], entities_of(question)):
                    wanted[key] = (answer, question_id)
        for key, (answer, question_id) in wanted.items():
            memory.remember(key, answer, id=question_id)
        return memory

    def keep_copies(self) -> None:
        """Write the question of every answer into ``answers.jsonl`` (an app may have
        written only ids), before a run replaces ``clarifications.jsonl``."""
        if any(self.known(i) is not None for i in self.answers if i not in self._copied):
            self._save()

    def _save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        lines = []
        for question_id, answer in self.answers.items():
            line: dict[str, Any] = {"id": question_id, "answer": answer}
            if question_id in self.answered_at:
                line["at"] = round(self.answered_at[question_id], 3)
            question = self.known(question_id)
            if question is not None:
                line["question"] = question
                self._copied.add(question_id)
            lines.append(orjson.dumps(line) + b"\n")
        _write_atomic(self.root / ANSWERS_FILE, b"".join(lines))


def run_memory(root: Path) -> AnswerMemory:
    """The answers given in ``root`` as a run applies them: ``answer_memory.jsonl``
    brought in line with ``answers.jsonl`` (which keeps its questions from now on)."""
    queue = ReviewQueue(root)
    queue.keep_copies()
    return queue.memory(into=AnswerMemory(root / MEMORY_FILE))


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
