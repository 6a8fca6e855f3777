"""What a run's LLM requests cost: tokens per task, and money when the user gives the price.

Tokens are the server's ``usage``; a server that sends none leaves characters only, and
then the money is an estimate at :data:`CHARS_PER_TOKEN` characters a token (``measured``
says which: ``usage``, ``characters``, ``usage and characters`` or ``none``). Cached
answers cost nothing; what they would have cost is ``saved``. Prices are USD per million
tokens (``--llm-price-in`` / ``--llm-price-out``, ``[llm] price_in`` / ``price_out``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from relmerge.providers.accounting import LLMStats, TaskUsage

# A rough rate for text a tokenizer never saw counted (English ~4, CJK ~1-1.5).
CHARS_PER_TOKEN = 4
PER_MILLION = 1_000_000


@dataclass(frozen=True)
class TaskCost:
    """One task's figures (see ``providers.accounting.TaskUsage``); ``usd`` once priced."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_chars: int = 0
    completion_chars: int = 0
    unmetered: int = 0
    unmetered_prompt_chars: int = 0
    unmetered_completion_chars: int = 0
    cache_hits: int = 0
    saved_prompt_tokens: int = 0
    saved_completion_tokens: int = 0
    saved_prompt_chars: int = 0
    usd: float | None = None

    @classmethod
    def of(cls, usage: TaskUsage) -> TaskCost:
        return cls(**asdict(usage))

    def billed_tokens(self) -> tuple[int, int]:
        """Prompt and completion tokens, those of answers without usage estimated."""
        return (
            self.prompt_tokens + self.unmetered_prompt_chars // CHARS_PER_TOKEN,
            self.completion_tokens + self.unmetered_completion_chars // CHARS_PER_TOKEN,
        )


@dataclass(frozen=True)
class Cost:
    """The run's cost: per task, in all, and in USD when both prices are known."""

    tasks: dict[str, TaskCost] = field(default_factory=dict)
    measured: str = "none"
    price_in: float | None = None
    price_out: float | None = None
    usd: float | None = None
    saved_usd: float | None = None

    @property
    def prompt_tokens(self) -> int:
        return sum(task.prompt_tokens for task in self.tasks.values())

    @property
    def completion_tokens(self) -> int:
        return sum(task.completion_tokens for task in self.tasks.values())

    @property
    def prompt_chars(self) -> int:
        return sum(task.prompt_chars for task in self.tasks.values())

    @property
    def requests(self) -> int:
        return sum(task.requests for task in self.tasks.values())

    @property
    def cache_hits(self) -> int:
        return sum(task.cache_hits for task in self.tasks.values())

    @property
    def saved_tokens(self) -> int:
        tasks = self.tasks.values()
        return sum(t.saved_prompt_tokens + t.saved_completion_tokens for t in tasks)

    def priced(self, price_in: float | None, price_out: float | None) -> Cost:
        """This cost in USD at ``price_in`` / ``price_out`` per million prompt /
        completion tokens (both needed; either None leaves the money out)."""
        if price_in is None or price_out is None:
            return replace(self, price_in=price_in, price_out=price_out)
        tasks: dict[str, TaskCost] = {}
        for name, task in self.tasks.items():
            prompt, completion = task.billed_tokens()
            usd = (prompt * price_in + completion * price_out) / PER_MILLION
            tasks[name] = replace(task, usd=round(usd, 6))
        saved = sum(
            t.saved_prompt_tokens * price_in + t.saved_completion_tokens * price_out
            for t in self.tasks.values()
        )
        return replace(
            self,
            tasks=tasks,
            price_in=price_in,
            price_out=price_out,
            usd=round(sum(t.usd or 0.0 for t in tasks.values()), 6),
            saved_usd=round(saved / PER_MILLION, 6),
        )

    def to_dict(self) -> dict[str, Any]:
        """The result file's ``cost`` object."""
        return {
            "measured": self.measured,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "prompt_chars": self.prompt_chars,
            "completion_chars": sum(t.completion_chars for t in self.tasks.values()),
            "unmetered_requests": sum(t.unmetered for t in self.tasks.values()),
            "cache_hits": self.cache_hits,
            "saved_tokens": self.saved_tokens,
            "price_in_usd_per_million": self.price_in,
            "price_out_usd_per_million": self.price_out,
            "usd": self.usd,
            "saved_usd": self.saved_usd,
            "tasks": {name: asdict(task) for name, task in sorted(self.tasks.items())},
        }


def cost_of(stats: LLMStats) -> Cost:
    """The cost a run's accounting counted (not priced yet: see :meth:`Cost.priced`)."""
    tasks = {name: TaskCost.of(usage) for name, usage in sorted(stats.by_task.items())}
    answered = sum(u.requests for u in stats.by_task.values())
    unmetered = sum(u.unmetered for u in stats.by_task.values())
    if not answered:
        measured = "none"
    elif not unmetered:
        measured = "usage"
    elif not sum(u.prompt_tokens + u.completion_tokens for u in stats.by_task.values()):
        measured = "characters"
    else:
        measured = "usage and characters"
    return Cost(tasks, measured)
