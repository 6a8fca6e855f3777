"""Deterministic in-process models that implement the real protocol, for tests and bench.

They go through the same parsing, validation and accounting as a real endpoint; only the
network is missing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

from relmerge.providers.base import LLMRequest, LLMResult, Usage
from relmerge.providers.parsing import parse_json_answer

Answer = str | dict[str, Any] | Exception
Script = Callable[[LLMRequest, list[dict[str, Any]]], Answer]

_JSON_BLOCK = re.compile(r"```json\n(.*?)\n```", re.DOTALL)


def request_records(request: LLMRequest) -> list[dict[str, Any]]:
    """The records of a request: the JSON array in its first user message's ```json block."""
    for message in request.messages:
        if message.role == "user":
            match = _JSON_BLOCK.search(message.content)
            if match:
                records = orjson.loads(match.group(1))
                return records if isinstance(records, list) else []
    return []


class ScriptedLLM:
    """Answers from a script: a function of (request, records) or a list used in order.

    An ``Exception`` answer is raised, which lets tests play provider failures.
    """

    available = True

    def __init__(self, script: Script | list[Answer], name: str = "scripted") -> None:
        self.name = name
        self._script = script
        self.requests: list[LLMRequest] = []

    async def invoke(self, request: LLMRequest) -> LLMResult:
        self.requests.append(request)
        records = request_records(request)
        if callable(self._script):
            answer = self._script(request, records)
        else:
            if not self._script:
                raise AssertionError("ScriptedLLM ran out of scripted answers")
            answer = self._script.pop(0)
        if isinstance(answer, Exception):
            raise answer
        text = answer if isinstance(answer, str) else orjson.dumps(answer).decode()
        return LLMResult(
            text=text,
            parsed=parse_json_answer(text),
            model=self.name,
            usage=Usage(
                prompt_tokens=sum(len(m.content) for m in request.messages) // 4,
                completion_tokens=len(text) // 4,
            ),
        )


def merge_all(request: LLMRequest, records: list[dict[str, Any]]) -> dict[str, Any]:
    """A script that fuses every record of a ``relation_merge`` request into the first."""
    first = records[0]
    return {"relation": {key: first[key] for key in ("type", "name", "description", "attributes")}}


def instant_merge_model() -> ScriptedLLM:
    """A model that answers every merge at once by keeping the first record's fields."""
    return ScriptedLLM(merge_all, name="instant-merge")
