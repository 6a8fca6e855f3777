"""The language-model protocol (DESIGN §4): ``async invoke(request) -> result``.

A provider implements one method. Parsing, validation, accounting and retries of invalid
answers live once, outside the providers, so every provider behaves the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class LLMRequest:
    """One chat request for a task (``relation_merge``, ``relation_cluster``, ``relation_judge``).

    ``schema`` is the JSON schema the answer must satisfy; providers pass it to the server
    according to their ``response_format`` mode, unless ``relaxed`` (a retry after an
    invalid answer asks in prompt-only mode: a server whose grammar forced the invalid
    answer would force it again). ``max_tokens`` bounds the answer (sized from the task
    and its records): an answer cut at the bound is invalid.
    """

    task: str
    messages: tuple[Message, ...]
    schema: dict[str, Any]
    temperature: float = 0.0
    max_tokens: int | None = None
    relaxed: bool = False


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class LLMResult:
    """What a model answered: the raw ``text``, its JSON (``parsed``, None if not JSON).

    ``attempts`` counts the HTTP requests the provider sent for this answer (retries on
    429/5xx included), so run accounting reports requests actually sent. ``truncated``:
    the answer stopped at ``max_tokens`` (it is never read as a prefix).
    """

    text: str
    parsed: Any
    model: str
    usage: Usage = field(default_factory=Usage)
    attempts: int = 1
    cached: bool = False
    truncated: bool = False


@runtime_checkable
class LanguageModel(Protocol):
    """Anything with a ``name``, an ``available`` flag and ``async invoke``."""

    name: str
    available: bool

    async def invoke(self, request: LLMRequest) -> LLMResult: ...


class NoLanguageModel:
    """The ``none`` provider: rules only. Stages check ``available`` and never call it."""

    name = "none"
    available = False

    async def invoke(self, request: LLMRequest) -> LLMResult:
        from relmerge.errors import ProviderError

        raise ProviderError("no language model is configured (--llm none)", retryable=False)
