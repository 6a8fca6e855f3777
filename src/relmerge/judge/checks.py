"""What a judge check is made of: the entity context, the verdict, a pending check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.tiers import PairDecision
from relmerge.errors import InputError
from relmerge.judge.canaries import JudgeCanaries
from relmerge.judge.outcome import LLMOutcome, NoLLMVerdict
from relmerge.model import EntityContext, ExtractedRelation
from relmerge.providers.accounting import AccountingModel

RelationLike = ExtractedRelation | dict[str, Any] | str


@dataclass(frozen=True)
class JudgeContext:
    """The two entities of the pair: names, profiles (background, arc), optional ids."""

    source_name: str = "A"
    target_name: str = "B"
    source_profile: str | None = None
    target_profile: str | None = None
    source_id: str = "source"
    target_id: str = "target"

    def entities(self) -> tuple[EntityContext, EntityContext]:
        return (
            EntityContext(self.source_id, self.source_name, self.source_profile),
            EntityContext(self.target_id, self.target_name, self.target_profile),
        )


@dataclass(frozen=True)
class PendingCheck:
    """A check the tiers could not settle: what the LLM or a person must decide."""

    new: ExtractedRelation
    olds: list[ExtractedRelation]
    pairs: list[PairDecision]
    undecided: list[PairDecision]
    entities: tuple[EntityContext, EntityContext]
    scores: dict[str, float]
    reason: str


# Why the rules keep a pair apart, by tier, in a verdict's words.
KEEP_REASONS = {
    "endpoints": "the relations are not between the same two entities",
    "direction": "reversed direction of a directed relation",
    "known_distinct": "judged distinct before",
    "remembered": "a person answered this question before",
}


class Verdict(BaseModel):
    """The judge's answer for one candidate."""

    decision: Literal["merge", "keep_both"]
    tier: str = Field(description="Who decided: fuzzy_high, fuzzy_low, guard, llm, human, …")
    scores: dict[str, float] = Field(default_factory=dict)
    matched_relation_id: str | None = None
    reason: str = ""
    llm_requests: int = 0
    question_id: str | None = Field(
        None, description="Id of the clarification left pending when the policy decided."
    )
    llm_outcome: LLMOutcome = Field(
        "not_asked",
        description="What the LLM did: not_asked (the rules decided), not_configured, "
        "answered, unsure, or no verdict because it was unavailable (no answer after "
        "retries, circuit breaker open), budget_spent, invalid (no valid answer), or "
        "distrusted (the model answered too few canary questions right).",
    )
    llm_error: str | None = Field(
        None, description="Why the LLM gave no verdict, when it failed (not when unsure)."
    )


def as_relation(value: RelationLike, relation_id: str, context: JudgeContext) -> ExtractedRelation:
    """A relation from an ``ExtractedRelation``, a partial dict, or plain text (seed 000)."""
    if isinstance(value, ExtractedRelation):
        return value
    if isinstance(value, str):
        if not value.strip():
            raise InputError("a relation given as text must not be empty")
        value = {"name": value, "description": value}
    if not isinstance(value, dict):
        raise InputError(f"a relation is an ExtractedRelation, a dict or text, not {type(value)}")
    data = {
        "relation_id": relation_id,
        "chunk_id": f"chunk_{relation_id}",
        "document_id": "judge",
        "source_entity_id": context.source_id,
        "target_entity_id": context.target_id,
        "source_entity_name": context.source_name,
        "target_entity_name": context.target_name,
        "type": "related",
        "attributes": {},
        "source_chunk_ids": [],
        **value,
    }
    data.setdefault("description", data.get("name"))
    data.setdefault("name", data.get("description"))
    try:
        return ExtractedRelation.model_validate(data)
    except Exception as error:
        raise InputError(f"invalid relation {relation_id!r}: {error}") from None


class Judging(Protocol):
    """The parts of a judge that the batch form uses (``RelationJudge`` has them)."""

    config: DeduplicateRelationsConfig
    llm: AccountingModel
    canary_desk: JudgeCanaries

    async def rules(
        self, new: ExtractedRelation, olds: list[ExtractedRelation], context: JudgeContext
    ) -> Verdict | PendingCheck: ...

    async def decide(self, pending: PendingCheck) -> Verdict: ...

    async def preflight_llm(self) -> int: ...

    async def clarify(
        self, pending: PendingCheck, reason: str, why: NoLLMVerdict | None = None
    ) -> Verdict: ...


def llm_merge(pair: PairDecision, matched_relation_id: str, reason: str, said: str) -> Verdict:
    """The verdict when the LLM merged the candidate with the existing relation of
    ``pair``: a merge, unless the rules hard-keep the pair (other endpoints, a known
    direction, judged distinct before): a hard keep binds the LLM too. ``said``: what the
    LLM did, for the reason of a kept pair."""
    if pair.hard:
        why = KEEP_REASONS.get(pair.tier, f"the rules hard-keep them ({pair.tier})")
        return Verdict(
            decision="keep_both",
            tier=pair.tier,
            scores=pair.scores,
            reason=f"{said}, but {why}",
            llm_outcome="answered",
        )
    return Verdict(
        decision="merge",
        tier="llm",
        scores=pair.scores,
        matched_relation_id=matched_relation_id,
        reason=reason,
        llm_outcome="answered",
    )
