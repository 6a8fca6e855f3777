"""Tolerant JSON extraction from model text: code fences and chatter around the object."""

from __future__ import annotations

import re
from typing import Any

import orjson

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def parse_json_answer(text: str) -> Any:
    """Return the JSON value in ``text``, or ``None`` when there is none.

    Tries, in order: the whole text, each fenced block, then the span from the first ``{``
    to the last ``}`` (models like to say "Here is the JSON:" first).
    """
    candidates = [text.strip()]
    candidates.extend(match.group(1).strip() for match in _FENCE.finditer(text))
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        if not candidate:
            continue
        try:
            return orjson.loads(candidate)
        except orjson.JSONDecodeError:
            continue
    return None
