"""One door for the LLM requests of every worker: the driver's own model answers them.

Workers cannot share the run's model object (its budget, cache, rate limit and counters
live in the driver), so each worker gets a :class:`GatewayModel` that hands its request
through a :class:`Door` to the driver. On Ray the door is the :class:`LLMGateway` actor
(:class:`RayDoor`): the driver takes queued requests from the actor, answers
them with the run's wrapped model under one semaphore of ``concurrency`` (the global
limit), and replies; local worker processes have a pipe to the driver instead
(``engines.processes``). Accounting, cache, budget and circuit breaker thus stay exactly where
a local run keeps them; a worker's question that got no answer at all is reported to the
driver's breaker through the same queue (``note_unreachable``), and how a request's canaries
were answered goes to the driver's verdict as a :class:`CanaryNote`, asked like a request,
so the verdict has heard them before the chunk's result lands and a model it stops is
asked nothing more. Errors cross the process boundary as plain tuples: ``ProviderError``
has a keyword-only constructor that pickle cannot call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from relmerge.decide.retry import report_unreachable
from relmerge.errors import BudgetExhaustedError, LLMUnavailableError, ProviderError, StoreError
from relmerge.providers.base import LanguageModel, LLMRequest, LLMResult, hear_canaries

Outcome = tuple[str, Any]  # ("ok", LLMResult) | ("provider", (message, retryable, attempts,
# kind, transport, timed_out)) | ("error", message); kind: "budget", "unavailable" or ""

_UNREACHABLE = -1  # the request id of a note for the breaker, not a request


@dataclass(frozen=True)
class CanaryNote:
    """How one request of a worker answered its canaries (of chunk ``chunk``), for the
    driver's verdict."""

    answers: tuple[bool | None, ...]
    chunk: int | None = None


def provider_failure(error: ProviderError) -> Outcome:
    kind = ""
    if isinstance(error, BudgetExhaustedError):
        kind = "budget"
    elif isinstance(error, LLMUnavailableError):
        kind = "unavailable"
    return "provider", (
        str(error),
        error.retryable,
        error.attempts,
        kind,
        error.transport,
        error.timed_out,
    )


def raise_failure(outcome: Outcome) -> None:
    """Raise the error an outcome carries, as the type the local run would have seen."""
    kind, value = outcome
    if kind == "provider":
        message, retryable, attempts, error_kind, transport, timed_out = value
        if error_kind == "budget":
            raise BudgetExhaustedError(message)
        if error_kind == "unavailable":
            raise LLMUnavailableError(message)
        raise ProviderError(
            message,
            retryable=retryable,
            attempts=attempts,
            transport=transport,
            timed_out=timed_out,
        )
    if kind == "store":  # a worker could not write its chunk's relation files
        raise StoreError(value)
    if kind != "ok":
        raise RuntimeError(f"the LLM gateway failed: {value}")


def landed(ref: Any) -> asyncio.Future[Any]:
    """An object ref as an asyncio future (``ref.future()`` works for Ray Client refs too)."""
    return asyncio.wrap_future(ref.future())


class LLMGateway:
    """The actor (run async in Ray): workers ``ask``, the driver ``take``s and ``reply``s."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[tuple[int, LLMRequest | None]] | None = None
        self._waiting: dict[int, asyncio.Future[Outcome]] = {}
        self._next = 0

    def _requests(self) -> asyncio.Queue[tuple[int, LLMRequest | None]]:
        if self._queue is None:
            self._queue = asyncio.Queue()
        return self._queue

    async def ask(self, request: LLMRequest) -> Outcome:
        request_id = self._next
        self._next += 1
        answer: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = answer
        await self._requests().put((request_id, request))
        return await answer

    async def note_unreachable(self) -> None:
        """A worker's question got no answer at all: passed on to the driver's breaker."""
        await self._requests().put((_UNREACHABLE, None))

    async def take(self, wait: float) -> list[tuple[int, LLMRequest | None]]:
        """The queued requests: at least one, or none after ``wait`` seconds."""
        queue = self._requests()
        try:
            taken = [await asyncio.wait_for(queue.get(), wait)]
        except TimeoutError:
            return []
        while not queue.empty():
            taken.append(queue.get_nowait())
        return taken

    async def reply(self, request_id: int, outcome: Outcome) -> None:
        answer = self._waiting.pop(request_id)
        if not answer.done():
            answer.set_result(outcome)


class Door(Protocol):
    """A worker's way to something the driver serves (the LLM, the embedding desk)."""

    async def ask(self, request: Any) -> Outcome: ...

    def note_unreachable(self) -> None:
        """Tell the driver's breaker that a question got no answer at all (no reply)."""
        ...


class RayDoor:
    """A :class:`Door` through an actor of :class:`LLMGateway`."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    async def ask(self, request: Any) -> Outcome:
        outcome: Outcome = await self.actor.ask.remote(request)
        return outcome

    def note_unreachable(self) -> None:
        self.actor.note_unreachable.remote()  # no reply to wait for


class GatewayModel:
    """The worker's provider: every request goes through the door to the driver's model.

    A question that got no answer at all is passed on to the driver's breaker
    (``note_unreachable``). The worker's stack over it counts the unusable answers, added
    to the driver's accounting when the worker's results come back.
    """

    def __init__(
        self, gateway: Door | None, name: str, available: bool, chunk: int | None = None
    ) -> None:
        self.gateway = gateway
        self.name = name
        self.available = available
        self.chunk = chunk  # the chunk this worker's requests belong to

    def note_unreachable(self) -> None:
        if self.gateway is not None:
            self.gateway.note_unreachable()

    async def hear_canaries(self, answers: Sequence[bool | None], chunk: int | None = None) -> None:
        """To the driver's verdict, through the door (asked like a request: once it is
        answered, the driver has heard it)."""
        if self.gateway is None:
            return
        note = CanaryNote(tuple(answers), self.chunk if chunk is None else chunk)
        raise_failure(await self.gateway.ask(note))

    async def invoke(self, request: LLMRequest) -> LLMResult:
        if self.gateway is None:
            raise ProviderError("no language model is configured (--llm none)", retryable=False)
        outcome = await self.gateway.ask(request)
        raise_failure(outcome)
        result: LLMResult = outcome[1]
        return result


async def answer(model: Any, request: Any, errors: list[BaseException]) -> Outcome:
    """``model``'s answer to a worker's request, as an outcome that crosses processes (a
    :class:`CanaryNote` is heard by the model's canary listener)."""
    try:
        if isinstance(request, CanaryNote):
            await hear_canaries(model, request.answers, request.chunk)
            return "ok", None
        return "ok", await model.invoke(request)
    except ProviderError as error:
        return provider_failure(error)
    except Exception as error:  # a bug: the run fails with it (``errors``), the worker is freed
        errors.append(error)
        return "error", f"{type(error).__name__}: {error}"


class GatewayServer:
    """The driver side: answers the gateway's requests with ``model``, ``limit`` at a time."""

    def __init__(self, gateway: Any, model: LanguageModel, concurrency: int) -> None:
        self.gateway = gateway
        self.model = model
        self.limit = asyncio.Semaphore(concurrency)
        self.errors: list[BaseException] = []
        self._stop = asyncio.Event()
        self._answering: set[asyncio.Task[None]] = set()

    async def _answer(self, request_id: int, request: LLMRequest) -> None:
        limit = self.limit if not isinstance(request, CanaryNote) else contextlib.nullcontext()
        async with limit:
            outcome = await answer(self.model, request, self.errors)
        await landed(self.gateway.reply.remote(request_id, outcome))

    async def serve(self) -> None:
        while not self._stop.is_set():
            for request_id, request in await landed(self.gateway.take.remote(0.2)):
                if request is None:
                    report_unreachable(self.model)
                    continue
                task = asyncio.create_task(self._answer(request_id, request))
                self._answering.add(task)
                task.add_done_callback(self._answering.discard)

    async def stop(self) -> None:
        self._stop.set()
        for task in list(self._answering):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
