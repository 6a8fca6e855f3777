"""One LLM question with validated retries, shared by every task.

Each retry tells the model what was invalid about its previous answer, and differs from
the request that failed in more than that: it is sent in prompt-only mode (``relaxed``),
since a model held to a grammar (llama.cpp's ``json_object`` with a schema) or repeating
itself at temperature 0 would give the same invalid answer again. An answer cut at its
``max_tokens`` is invalid, never read as a prefix. A provider error that retrying cannot
fix (bad key, unknown model) is raised and stops the run; transient ones count as a failed
attempt; a spent budget or an open circuit breaker fails the group at once (no retry).
``max_attempts`` bounds every request about one batch (:class:`Attempts`), a caller's later
re-ask included. A question whose every attempt failed in transport (no answer came back at
all) fails as ``llm_unavailable`` and is reported to the run's circuit breaker
(``providers.breaker``) through the model's ``note_unreachable``; the failure says whether
its last attempt timed out (``GroupFailed.timed_out``). A caller that asks a timed-out
question again in smaller requests (``decide.pack``: a pack's blocks alone) passes
``split_on_timeout``: the first timed-out attempt ends the ask, unreported (the smaller
requests count instead).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from relmerge.errors import (
    BudgetExhaustedError,
    InvalidAnswerError,
    LLMUnavailableError,
    ProviderError,
)
from relmerge.providers.base import (
    InvalidAnswerCounter,
    LanguageModel,
    LLMRequest,
    LLMResult,
    unreachable_counter,
)

T = TypeVar("T")


FAILED = "deduplication_failed"
BUDGET_SPENT = "llm_budget_exhausted"
UNAVAILABLE = "llm_unavailable"

# Stands in for an empty answer in the retry's conversation: several OpenAI-compatible
# servers (Mistral, gateways in front of Anthropic models) reject an empty assistant turn
# with HTTP 400, which would stop the whole run instead of failing one attempt.
EMPTY_ANSWER = "(empty answer)"


def _previous(text: str) -> str:
    """The previous answer as the retry quotes it back: never empty, at most 4000 chars."""
    return text[:4000] if text.strip() else EMPTY_ANSWER


class GroupFailed(Exception):
    """No valid answer: every attempt was invalid, or the LLM budget is spent.

    ``reason`` is the last problem seen; ``code`` is the issue code the stage records;
    ``invalid_answers`` counts the answers that arrived but were unusable (a model that
    answers, however badly, may do better on a later, differently ordered request; an
    endpoint that never answered will not). ``timed_out``: an ``llm_unavailable`` failure
    whose last attempt timed out (``ProviderError.timed_out``): a smaller request may
    still be answered in time.
    """

    def __init__(
        self,
        reason: str,
        code: str = FAILED,
        invalid_answers: int = 0,
        *,
        timed_out: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code
        self.invalid_answers = invalid_answers
        self.timed_out = timed_out


class Attempts:
    """The requests one batch may still send (``max_attempts``), shared by every ask about
    it: retries after an invalid answer, a re-ask in another order, a fallback to another
    task. ``keep`` requests are held back once an answer was invalid (for a re-ask the
    caller makes later); ``used`` counts the requests sent (transport retries of one
    request by the provider apart)."""

    def __init__(self, limit: int, keep: int = 0) -> None:
        self.left = max(0, limit)
        self.keep = keep
        self.used = 0

    def take(self, after_invalid: bool = False) -> bool:
        """Spend one request, or say there is none (left, or to spend now)."""
        if self.left <= (self.keep if after_invalid else 0):
            return False
        self.left -= 1
        self.used += 1
        return True


async def ask_validated(
    llm: LanguageModel,
    build: Callable[[list[tuple[str, str]]], LLMRequest],
    validate: Callable[[Any], T],
    attempts: int | Attempts,
    *,
    split_on_timeout: bool = False,
) -> tuple[T, LLMResult]:
    """Send, parse, validate; retry with feedback while ``attempts`` has requests left (an
    ``int``: that many, for this ask alone).

    ``split_on_timeout``: the caller asks a question that timed out again in smaller
    requests, so an attempt that timed out fails the ask at once (``GroupFailed`` with
    ``timed_out``, code ``llm_unavailable``), without telling the circuit breaker."""
    budget = Attempts(attempts) if isinstance(attempts, int) else attempts
    feedback: list[tuple[str, str]] = []
    reason = "no attempt was made"
    tried = unreachable = 0  # attempts made, and those that got no answer at all
    timed_out = False  # the last provider error was a timeout
    while budget.take(after_invalid=bool(feedback)):
        request = build(feedback)
        if feedback:  # after an invalid answer: not the same request again
            request = replace(request, relaxed=True)
        tried += 1
        try:
            result = await llm.invoke(request)
        except BudgetExhaustedError as error:
            raise GroupFailed(str(error), BUDGET_SPENT) from None
        except LLMUnavailableError as error:
            raise GroupFailed(str(error), UNAVAILABLE) from None
        except ProviderError as error:
            if not error.retryable:
                raise
            reason = f"the model endpoint failed: {error}"
            unreachable += error.transport
            timed_out = error.timed_out
            if timed_out and split_on_timeout:
                raise GroupFailed(
                    f"the LLM did not answer in time: {reason}", UNAVAILABLE, timed_out=True
                ) from None
            continue
        if result.truncated:
            reason = (
                f"the answer was cut at its limit of {request.max_tokens} tokens before it "
                "was complete; answer again, shorter (short descriptions; relation_list may "
                "be left out)"
            )
            feedback.append((_previous(result.text), reason))
            _note_invalid(llm)
            continue
        if result.parsed is None:
            reason = "LLM output is not valid JSON."
            feedback.append((_previous(result.text), reason))
            _note_invalid(llm)
            continue
        try:
            return validate(result.parsed), result
        except InvalidAnswerError as error:
            reason = str(error)
            feedback.append((_previous(result.text), reason))
            _note_invalid(llm)
    if tried and unreachable == tried:
        report_unreachable(llm)
        raise GroupFailed(f"the LLM was unavailable: {reason}", UNAVAILABLE, timed_out=timed_out)
    raise GroupFailed(reason, invalid_answers=len(feedback))


def _note_invalid(llm: LanguageModel) -> None:
    """Tell the run's accounting (the model asked, when it counts them) an answer was
    unusable."""
    if isinstance(llm, InvalidAnswerCounter):
        llm.note_invalid()


def report_unreachable(llm: object) -> None:
    """Tell the run's circuit breaker (the model asked, or a layer it wraps, that counts
    unanswered questions) that a question got no answer at all."""
    counter = unreachable_counter(llm)
    if counter is not None:
        counter.note_unreachable()
