"""Counts what a run spends on its language model: requests sent, cache hits, tokens.

Tokens are the server's own count (``usage``), per task (``relation_merge``,
``relation_cluster``, ``relation_judge``): they are what a user pays for. Characters are
counted too, always, because a server that sends no ``usage`` leaves them the only measure
(``unmetered`` says how many answers came so). A cached answer costs nothing: what it
would have cost goes to ``saved_*``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from relmerge.errors import ProviderError
from relmerge.providers.base import LanguageModel, LLMRequest, LLMResult


@dataclass
class TaskUsage:
    """One task's spending: requests sent (retries included), their tokens and characters
    (of the answers that came back), and what the cache saved."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_chars: int = 0
    completion_chars: int = 0
    unmetered: int = 0  # answers whose server sent no usage: only characters are known
    unmetered_prompt_chars: int = 0
    unmetered_completion_chars: int = 0
    cache_hits: int = 0
    saved_prompt_tokens: int = 0
    saved_completion_tokens: int = 0
    saved_prompt_chars: int = 0

    def add(self, request: LLMRequest, result: LLMResult) -> None:
        chars = prompt_chars(request)
        if result.cached:
            self.cache_hits += 1
            self.saved_prompt_tokens += result.usage.prompt_tokens
            self.saved_completion_tokens += result.usage.completion_tokens
            self.saved_prompt_chars += chars
            return
        self.requests += result.attempts
        self.prompt_tokens += result.usage.prompt_tokens
        self.completion_tokens += result.usage.completion_tokens
        self.prompt_chars += chars
        self.completion_chars += len(result.text)
        if not result.usage.reported:
            self.unmetered += 1
            self.unmetered_prompt_chars += chars
            self.unmetered_completion_chars += len(result.text)


def prompt_chars(request: LLMRequest) -> int:
    """The characters of a request's messages (what a server without ``usage`` was sent)."""
    return sum(len(message.content) for message in request.messages)


@dataclass
class LLMStats:
    requests: int = 0
    cache_hits: int = 0
    failed_requests: int = 0
    invalid_answers: int = 0  # answers that arrived but were not JSON or failed validation
    prompt_tokens: int = 0
    completion_tokens: int = 0
    by_task: dict[str, TaskUsage] = field(default_factory=dict)

    def task(self, name: str) -> TaskUsage:
        """``name``'s figures, created at its first request."""
        return self.by_task.setdefault(name, TaskUsage())

    def tokens(self) -> dict[str, int]:
        return {
            "prompt": self.prompt_tokens,
            "completion": self.completion_tokens,
            "total": self.prompt_tokens + self.completion_tokens,
        }


class AccountingModel:
    """Wraps any :class:`LanguageModel` and adds up requests and tokens into ``stats``."""

    def __init__(self, inner: LanguageModel, on_invalid: Callable[[], None] = lambda: None) -> None:
        """``on_invalid`` hears of each invalid answer (it is asked again: progress)."""
        self.inner = inner
        self.name = inner.name
        self.available = inner.available
        self.stats = LLMStats()
        self.on_invalid = on_invalid

    def note_invalid(self) -> None:
        self.stats.invalid_answers += 1
        self.on_invalid()

    async def invoke(self, request: LLMRequest) -> LLMResult:
        try:
            result = await self.inner.invoke(request)
        except ProviderError as error:
            self.stats.requests += error.attempts
            self.stats.failed_requests += error.attempts
            self.stats.task(request.task).requests += error.attempts
            raise
        self.stats.task(request.task).add(request, result)
        if result.cached:
            self.stats.cache_hits += 1
        else:
            self.stats.requests += result.attempts
            self.stats.failed_requests += result.attempts - 1
            self.stats.prompt_tokens += result.usage.prompt_tokens
            self.stats.completion_tokens += result.usage.completion_tokens
        return result
