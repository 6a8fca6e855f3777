"""``RelationJudge``: is a new relation a duplicate of the ones a live graph already has?

For apps that keep a graph up to date (seed 000): a new relation arrives for a pair of
entities; the tiers settle the obvious cases without an LLM, the LLM sees both entities'
profiles and *all* existing relations of the pair when the tiers cannot decide, and a
person answers when the LLM is unsure. Answers are remembered.

>>> >>> from relmerge import RelationJudge
>>> from relmerge.providers.embedding import HashEmbedder
>>> judge = RelationJudge(embedder=HashEmbedder())
>>> verdict = asyncio.run(judge.check("ally in the quest", ["ally in the quest"]))
>>> (verdict.decision, verdict.tier)
('merge', 'fuzzy_high')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field
from rapidfuzz import fuzz

from relmerge.config import DeduplicateRelationsConfig
from relmerge.errors import InputError
from relmerge.model import ExtractedRelation
from relmerge.prompts.context import EntityContext, directed_record
from relmerge.providers.accounting import AccountingModel
from relmerge.providers.base import LanguageModel, NoLanguageModel
from relmerge.providers.embedding import CachedEmbedder, EmbeddingModel
from relmerge.review.clarifiers import Clarifier
from relmerge.review.memory import AnswerMemory, pair_key
from relmerge.stages.llm_retry import GroupFailed
from relmerge.stages.semantic.clarify import clarification
from relmerge.stages.semantic.features import relation_features
from relmerge.stages.semantic.lexicon import load_lexicon
from relmerge.stages.semantic.llm_ask import ask_judge
from relmerge.stages.semantic.text import embedding_text
from relmerge.stages.semantic.tiers import PairDecision, decide_pair

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


class RelationJudge:
    """Check new relations against existing ones; tiers first, then LLM, then a person.

    ``memory`` remembers human answers (pass an ``AnswerMemory(path)`` to keep them across
    processes); ``clarifier`` answers unsure cases (callback, terminal, or review queue).
    """

    def __init__(
        self,
        *,
        llm: LanguageModel | None = None,
        embedder: EmbeddingModel | None = None,
        config: DeduplicateRelationsConfig | None = None,
        clarifier: Clarifier | None = None,
        memory: AnswerMemory | None = None,
    ) -> None:
        self.config = config or DeduplicateRelationsConfig()
        self.llm = AccountingModel(llm or NoLanguageModel())
        if embedder is None:
            from relmerge.providers.use_embed import UseEmbedder

            embedder = UseEmbedder()
        self.embedder = (
            embedder if isinstance(embedder, CachedEmbedder) else CachedEmbedder(embedder)
        )
        self.clarifier = clarifier
        self.memory = memory if memory is not None else AnswerMemory()
        self.lexicon = load_lexicon()

    async def check(
        self,
        candidate: RelationLike,
        existing: Sequence[RelationLike],
        context: JudgeContext | None = None,
    ) -> Verdict:
        context = context or JudgeContext()
        new = as_relation(candidate, "candidate", context)
        olds = [as_relation(item, f"existing_{i + 1}", context) for i, item in enumerate(existing)]
        if not olds:
            return Verdict(decision="keep_both", tier="policy", reason="no existing relation")
        before = self.llm.stats.requests
        outcome = await self._rules(new, olds, context)
        verdict = outcome if isinstance(outcome, Verdict) else await self._decide(outcome)
        return verdict.model_copy(update={"llm_requests": self.llm.stats.requests - before})

    async def check_many(
        self, checks: Sequence[tuple[RelationLike, Sequence[RelationLike], JudgeContext | None]]
    ) -> list[Verdict]:
        """Check many candidates with as few LLM requests as possible: the tiers first, then
        one ``relation_cluster`` request per pair of entities for all its open candidates
        (``llm_requests`` of those verdicts counts the shared request)."""
        from relmerge.judge_batch import check_batch

        return await check_batch(self, checks)

    async def _pairs(
        self, new: ExtractedRelation, olds: list[ExtractedRelation]
    ) -> list[PairDecision]:
        relations = [new, *olds]
        texts = [embedding_text(r, self.config.embedding_description_chars) for r in relations]
        vectors = await self.embedder.embed(texts)
        names = await self.embedder.embed([r.name for r in relations])
        features = [relation_features(r, self.lexicon) for r in relations]
        decisions = []
        for i in range(1, len(relations)):
            same_direction = (new.source_entity_id, new.target_entity_id) == (
                relations[i].source_entity_id,
                relations[i].target_entity_id,
            )
            decisions.append(
                decide_pair(
                    0,
                    i,
                    (features[0], features[i]),
                    same_direction,
                    fuzz.ratio(features[0].text, features[i].text),
                    float(vectors[0] @ vectors[i]),
                    float(names[0] @ names[i]),
                    self.config,
                )
            )
        return decisions

    async def _rules(
        self, new: ExtractedRelation, olds: list[ExtractedRelation], context: JudgeContext
    ) -> Verdict | PendingCheck:
        """What the tiers and remembered answers decide; a ``PendingCheck`` if nothing."""
        pairs = await self._pairs(new, olds)
        merges = [p for p in pairs if p.verdict == "merge"]
        if merges:
            best = max(merges, key=lambda p: p.scores["fuzzy"] / 100 + p.scores["cosine"])
            return Verdict(
                decision="merge",
                tier=best.tier,
                scores=best.scores,
                matched_relation_id=olds[best.b - 1].relation_id,
                reason=f"tier {best.tier}: the scores are above the merge band",
            )
        undecided = [p for p in pairs if p.verdict == "undecided"]
        best_scores = max(pairs, key=lambda p: p.scores["cosine"]).scores
        if not undecided:
            hard = any(p.hard for p in pairs)
            return Verdict(
                decision="keep_both",
                tier="guard" if hard else "fuzzy_low",
                scores=best_scores,
                reason="reversed direction of a non-symmetric relation"
                if hard
                else "the scores are below the keep band for every existing relation",
            )
        entities = context.entities()
        for p in undecided:
            answer = self.memory.get(pair_key(new.to_dict(), olds[p.b - 1].to_dict(), entities))
            if answer == "merge":
                return Verdict(
                    decision="merge",
                    tier="remembered",
                    scores=p.scores,
                    matched_relation_id=olds[p.b - 1].relation_id,
                    reason="a person answered this question before",
                )
        if all(
            self.memory.get(pair_key(new.to_dict(), olds[p.b - 1].to_dict(), entities))
            == "keep_both"
            for p in undecided
        ):
            return Verdict(
                decision="keep_both",
                tier="remembered",
                scores=best_scores,
                reason="a person answered this question before",
            )
        guards = sorted({g for p in undecided for g in p.guards})
        reason = f"guards: {', '.join(guards)}" if guards else "between the bands"
        return PendingCheck(new, olds, pairs, undecided, entities, best_scores, reason)

    async def _decide(self, pending: PendingCheck) -> Verdict:
        """The LLM for one open check, then a person, then the policy."""
        reason = pending.reason
        if self.llm.available:
            verdict = await self._ask_llm(
                pending.new, pending.olds, pending.pairs, pending.entities
            )
            if verdict is not None:
                return verdict
            reason = "the LLM was unsure"
        return await self._clarify(pending, reason)

    async def _ask_llm(
        self,
        new: ExtractedRelation,
        olds: list[ExtractedRelation],
        pairs: list[PairDecision],
        entities: tuple[EntityContext, EntityContext],
    ) -> Verdict | None:
        forward = (entities[0].entity_id, entities[1].entity_id)
        try:
            outcome, _ = await ask_judge(
                self.llm,
                [directed_record(r, forward, self.config.prompt_description_chars) for r in olds],
                directed_record(new, forward, self.config.prompt_description_chars),
                entities,
                self.config,
            )
        except GroupFailed:
            return None
        if outcome.verdict == "unsure":
            return None
        if outcome.verdict == "merge":
            index = next(i for i, r in enumerate(olds) if r.relation_id == outcome.duplicate_of)
            pair = pairs[index]
            if pair.hard:  # the LLM may not reverse a directed relation
                return Verdict(
                    decision="keep_both",
                    tier="guard",
                    scores=pair.scores,
                    reason="the LLM said merge, but the direction is reversed",
                )
            return Verdict(
                decision="merge",
                tier="llm",
                scores=pair.scores,
                matched_relation_id=outcome.duplicate_of,
                reason=outcome.reason,
            )
        best = max(pairs, key=lambda p: p.scores["cosine"])
        return Verdict(decision="keep_both", tier="llm", scores=best.scores, reason=outcome.reason)

    async def _clarify(self, pending: PendingCheck, reason: str) -> Verdict:
        new, olds, entities, scores = pending.new, pending.olds, pending.entities, pending.scores
        best = max(pending.undecided, key=lambda p: p.scores["cosine"])
        match = olds[best.b - 1]
        question = clarification(
            [match, new],
            [match.relation_id, new.relation_id],
            entities,
            best.scores,
            reason,
            self.config.unsure_policy,
        )
        answer = await self.clarifier.ask(question) if self.clarifier is not None else None
        if answer is not None:
            self.memory.remember(pair_key(new.to_dict(), match.to_dict(), entities), answer)
            return Verdict(
                decision=answer,
                tier="human",
                scores=best.scores,
                matched_relation_id=match.relation_id if answer == "merge" else None,
                reason=f"a person answered ({reason})",
            )
        decision = self.config.unsure_policy
        return Verdict(
            decision=decision,
            tier="policy",
            scores=scores,
            matched_relation_id=match.relation_id if decision == "merge" else None,
            reason=f"{reason}; no answer, the policy decided",
            question_id=question["id"],
        )
