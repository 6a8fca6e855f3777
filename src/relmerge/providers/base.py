"""The language-model protocol (DESIGN §4): ``async invoke(request) -> result``.

A provider implements one method. Parsing, validation, accounting and retries of invalid
answers live once, outside the providers, so every provider behaves the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

# Re-exported: the kernel reaches the stack's layers through this module.
from relmerge.wrapping import Wrapping as Wrapping
from relmerge.wrapping import layers as layers

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
    and its records): an answer cut at the bound is invalid. ``prompt`` names the prompt
    and its version (``relation_cluster@2``, see ``relmerge.prompts``): part of the cache
    key, so that an answer to an older prompt is never reused.
    """

    task: str
    messages: tuple[Message, ...]
    schema: dict[str, Any]
    temperature: float = 0.0
    max_tokens: int | None = None
    relaxed: bool = False
    prompt: str = ""


@dataclass(frozen=True)
class Usage:
    """Tokens as the server counted them; ``reported`` False: it sent no ``usage`` (the
    run then counts that request's characters instead, see ``providers.accounting``)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    reported: bool = True

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


# -- What a layer of a model stack can do --------------------------------------------------
#
# A run's model is a stack of layers (``relmerge.wrapping``). What the run needs from a
# particular layer is one of these protocols, found by walking the stack with ``layers``.


@runtime_checkable
class Preflightable(Protocol):
    """A provider that can check its endpoint before a run spends anything."""

    async def preflight(self) -> int:
        """One minimal request (retried while a server is starting); the requests sent.
        Raises :class:`~relmerge.errors.ProviderError` when the endpoint cannot work."""
        ...


@runtime_checkable
class CacheIdentified(Protocol):
    """A provider that says what, besides a request, determines its answers (for cache
    keys): a dict for a language model (provider, endpoint, model, response format), a
    string for an embedder. ``None``: the class and the model name say it."""

    @property
    def cache_identity(self) -> object: ...


@runtime_checkable
class InvalidAnswerCounter(Protocol):
    """The layer that counts answers that arrived but were unusable (the accounting)."""

    def note_invalid(self) -> None: ...


@runtime_checkable
class UnreachableCounter(Protocol):
    """The layer that hears of questions no attempt of which got any answer (the circuit
    breaker, or on a worker the door to the driver's breaker)."""

    def note_unreachable(self) -> None: ...


@runtime_checkable
class CanaryListener(Protocol):
    """The layer that hears how the model answered a request's canaries as soon as the
    answer is read (a run's canary gate; on a worker, the door to the driver's): the
    verdict weighs them at once, so a model it stops is asked nothing more. ``chunk``:
    the chunk of the run they came from, where a worker says (None: the one being worked
    here)."""

    async def hear_canaries(
        self, answers: Sequence[bool | None], chunk: int | None = None
    ) -> None: ...


async def hear_canaries(
    component: object, answers: Sequence[bool | None], chunk: int | None = None
) -> None:
    """Tell the outermost listening layer of ``component`` (if any) how its canaries
    were answered."""
    found = (layer for layer in layers(component) if isinstance(layer, CanaryListener))
    listener = next(found, None)
    if listener is not None and answers:
        await listener.hear_canaries(answers, chunk)


def preflighter(component: object) -> Preflightable | None:
    """The outermost layer that can check its endpoint, if any."""
    return next((layer for layer in layers(component) if isinstance(layer, Preflightable)), None)


def unreachable_counter(component: object) -> UnreachableCounter | None:
    """The outermost layer that counts unanswered questions (the breaker), if any."""
    found = (layer for layer in layers(component) if isinstance(layer, UnreachableCounter))
    return next(found, None)


def innermost(component: object) -> object:
    """The provider at the bottom of a stack."""
    *_, last = layers(component)
    return last
