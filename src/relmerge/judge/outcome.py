"""What became of the LLM's part in a check, said honestly.

A verdict the clarifier or the policy decided tells why the LLM did not: it was unsure, or
it never gave an answer (the endpoint stopped answering, the circuit breaker is open, the
budget is spent, or every answer was invalid). "Unsure" is a judgement of the model; the
others are failures an app must be able to tell apart from it (``Verdict.llm_outcome``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from relmerge.decide.retry import BUDGET_SPENT, UNAVAILABLE, GroupFailed

LLMOutcome = Literal[
    "not_asked",  # the rules or a remembered answer decided
    "not_configured",  # the rules could not decide and no LLM is configured
    "answered",  # the LLM said merge or keep_both
    "unsure",  # the LLM answered "unsure"
    "unavailable",  # no answer came back (after retries), or the circuit breaker is open
    "budget_spent",  # the LLM budget was spent before the question could be asked
    "invalid",  # answers came back, none of them valid
    "distrusted",  # the model failed its canaries (judge.canaries): not asked, not applied
]

UNAVAILABLE_PREFIX = "LLM unavailable: "
_ECHOED = ("the LLM was unavailable: ",)  # what ask_validated puts before the cause
_BUDGET_TAIL = "; decided without the LLM"


@dataclass(frozen=True)
class NoLLMVerdict:
    """Why the LLM gave no verdict: the outcome, the reason a person and the verdict are
    told, and the error behind it (None when the LLM simply was unsure)."""

    outcome: LLMOutcome
    reason: str
    error: str | None = None

    @property
    def failed(self) -> bool:
        """The LLM could not be asked at all (asking again now would fail the same way)."""
        return self.outcome in ("unavailable", "budget_spent")


UNSURE = NoLLMVerdict("unsure", "the LLM was unsure")


def failure_of(error: GroupFailed) -> NoLLMVerdict:
    """The honest outcome of a question that got no valid answer."""
    detail = error.reason
    for echoed in _ECHOED:
        detail = detail.removeprefix(echoed)
    if error.code == UNAVAILABLE:
        return NoLLMVerdict("unavailable", UNAVAILABLE_PREFIX + detail, detail)
    if error.code == BUDGET_SPENT:
        detail = detail.removesuffix(_BUDGET_TAIL)
        return NoLLMVerdict("budget_spent", UNAVAILABLE_PREFIX + detail, detail)
    return NoLLMVerdict("invalid", f"no valid LLM answer: {detail}", detail)
