"""``RelationJudge``: is a new relation a duplicate of the ones a live graph already has?

For apps that keep a graph up to date (seed 000): a new relation arrives for a pair of
entities; the kernel's tiers settle the obvious cases without an LLM, the LLM sees both
entities' profiles and *all* existing relations of the pair when the tiers cannot decide,
and a person answers when the LLM is unsure. Answers are remembered. Pairs are scored,
tiered and looked up in the memory by the same kernel code as a batch's blocks
(``relmerge.decide``).

Each endpoint is checked once, before the judge first uses it (``judge.preflight``): a
dead or wrong one raises :class:`~relmerge.errors.ProviderError`, as ``relmerge judge``
exits 2. An LLM that fails during a check (no answer after retries, circuit breaker open,
budget spent, no valid answer) is said so in the verdict (``llm_outcome``, ``llm_error``,
a reason "LLM unavailable: …"), never passed off as an unsure LLM.

>>> import asyncio
>>> from relmerge import RelationJudge
>>> from relmerge.providers.embedding import HashEmbedder
>>> judge = RelationJudge(embedder=HashEmbedder())
>>> verdict = asyncio.run(judge.check("ally in the quest", ["ally in the quest"]))
>>> (verdict.decision, verdict.tier)
('merge', 'fuzzy_high')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from relmerge.config import DeduplicateRelationsConfig, EmbeddingSettings
from relmerge.decide.ask import ask_judge
from relmerge.decide.clarify import clarification
from relmerge.decide.features import relation_features
from relmerge.decide.job import score_pairs
from relmerge.decide.lexicon import lexicon_for
from relmerge.decide.memory import pair_key, remembered
from relmerge.decide.retry import GroupFailed
from relmerge.decide.text import embedding_text
from relmerge.decide.tiers import PairDecision
from relmerge.judge.batch import check_batch
from relmerge.judge.canaries import JudgeCanaries, certain_pairs
from relmerge.judge.checks import (
    KEEP_REASONS,
    JudgeContext,
    PendingCheck,
    RelationLike,
    Verdict,
    as_relation,
    llm_merge,
)
from relmerge.judge.outcome import UNSURE, NoLLMVerdict, failure_of
from relmerge.judge.preflight import Preflight
from relmerge.model import EntityContext, ExtractedRelation
from relmerge.prompts.context import directed_record
from relmerge.providers.base import LanguageModel, NoLanguageModel
from relmerge.providers.embedding import EmbeddingModel
from relmerge.providers.stack import build_embedder_stack, build_model_stack, get_embedder
from relmerge.review.clarifiers import Clarifier
from relmerge.review.memory import AnswerMemory

__all__ = ["JudgeContext", "RelationJudge", "RelationLike", "Verdict"]


def _best(pairs: Sequence[PairDecision]) -> PairDecision:
    return max(pairs, key=lambda p: p.scores["fuzzy"] / 100 + p.scores["cosine"])


class RelationJudge:
    """Check new relations against existing ones; tiers first, then LLM, then a person.

    ``memory`` remembers human answers (pass an ``AnswerMemory(path)`` to keep them across
    processes); ``clarifier`` answers unsure cases (callback, terminal, or review queue).
    The endpoints are checked before their first use (``preflight``).
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
        # No run limits: a budget or a breaker of a run would outlive it in an app.
        stack = build_model_stack(llm or NoLanguageModel(), self.config, run_limits=False)
        self.llm = stack.model
        self.embedder = (
            build_embedder_stack(embedder)
            if embedder is not None
            else get_embedder(EmbeddingSettings())  # the default: the offline USE
        )
        self.clarifier = clarifier
        self.memory = memory if memory is not None else AnswerMemory()
        self.lexicon = lexicon_for(self.config)
        self._llm_check = Preflight(self.llm)
        self._embedder_check = Preflight(self.embedder)
        self.canary_desk = JudgeCanaries(self.config)

    @property
    def canaries(self) -> dict[str, Any]:
        """How the model answered its canary questions (``relmerge.judge.canaries``):
        counts, agreement, the sequential test's verdict and rule, whether it is
        distrusted (then no LLM merge is applied: checks go to the clarifier, saying why)."""
        return self.canary_desk.figures()

    @property
    def preflight_requests(self) -> int:
        """Requests the endpoint checks sent (not counted in any ``llm_requests``)."""
        return self._llm_check.requests + self._embedder_check.requests

    async def preflight(self) -> int:
        """Check both endpoints now rather than before their first use (a command does,
        before any work); the requests sent. Raises
        :class:`~relmerge.errors.ProviderError` for an endpoint that cannot work."""
        return await self._llm_check.ensure() + await self._embedder_check.ensure()

    async def preflight_llm(self) -> int:
        """Check the LLM endpoint unless it passed before (the first question waits)."""
        return await self._llm_check.ensure() if self.llm.available else 0

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
        outcome = await self.rules(new, olds, context)
        verdict = outcome if isinstance(outcome, Verdict) else await self.decide(outcome)
        return verdict.model_copy(update={"llm_requests": self.llm.stats.requests - before})

    async def check_many(
        self, checks: Sequence[tuple[RelationLike, Sequence[RelationLike], JudgeContext | None]]
    ) -> list[Verdict]:
        """Check many candidates with as few LLM requests as possible: the tiers first, then
        one ``relation_cluster`` request per pair of entities for all its open candidates
        (``llm_requests`` of those verdicts counts the shared request)."""
        return await check_batch(self, checks)

    async def _pairs(
        self, new: ExtractedRelation, olds: list[ExtractedRelation]
    ) -> list[PairDecision]:
        """The kernel's verdict for (candidate, each existing relation)."""
        relations = [new, *olds]
        await self._embedder_check.ensure()
        chars = self.config.embedding_description_chars
        descriptions = await self.embedder.embed([embedding_text(r, chars) for r in relations])
        names = await self.embedder.embed([r.name for r in relations])
        features = [relation_features(r, self.lexicon) for r in relations]
        pairs = [(0, i) for i in range(1, len(relations))]
        return score_pairs(relations, features, descriptions, names, pairs, self.config)

    async def rules(
        self, new: ExtractedRelation, olds: list[ExtractedRelation], context: JudgeContext
    ) -> Verdict | PendingCheck:
        """What the tiers and remembered answers decide; a ``PendingCheck`` if nothing."""
        entities = context.entities()
        pairs = remembered(await self._pairs(new, olds), [new, *olds], entities, self.memory)
        merges = [p for p in pairs if p.verdict == "merge"]
        if merges:
            best = _best(merges)
            return Verdict(
                decision="merge",
                tier=best.tier,
                scores=best.scores,
                matched_relation_id=olds[best.b - 1].relation_id,
                reason=KEEP_REASONS["remembered"]
                if best.tier == "remembered"
                else f"tier {best.tier}: the scores are in its merge band",
            )
        undecided = [p for p in pairs if p.verdict == "undecided"]
        best_scores = max(pairs, key=lambda p: p.scores["cosine"]).scores
        if not undecided:
            decisive = next((p for p in pairs if p.hard), pairs[0])
            return Verdict(
                decision="keep_both",
                tier=decisive.tier,
                scores=best_scores,
                reason=KEEP_REASONS.get(
                    decisive.tier, "the scores are below the keep band for every existing relation"
                ),
            )
        guards = sorted({g for p in undecided for g in p.guards})
        tiers = sorted({p.tier for p in undecided})
        reason = f"guards: {', '.join(guards)}" if guards else f"undecided ({', '.join(tiers)})"
        return PendingCheck(new, olds, pairs, undecided, entities, best_scores, reason)

    async def decide(self, pending: PendingCheck) -> Verdict:
        """The LLM for one open check, then a person, then the policy."""
        if not self.llm.available:
            return await self.clarify(
                pending, pending.reason, NoLLMVerdict("not_configured", pending.reason)
            )
        if self.canary_desk.distrusted:
            why = self.canary_desk.why
            return await self.clarify(pending, why.reason, why)
        await self.preflight_llm()
        verdict = await self._ask_llm(pending.new, pending.olds, pending.pairs, pending.entities)
        if isinstance(verdict, Verdict) or verdict.outcome == "unsure":
            await self._canary_after(pending)
        if self.canary_desk.distrusted:  # this check's canary tipped it: not applied
            why = self.canary_desk.why
            return await self.clarify(pending, why.reason, why)
        if isinstance(verdict, Verdict):
            return verdict.model_copy(update={"llm_outcome": "answered"})
        return await self.clarify(pending, verdict.reason, verdict)

    async def _canary_after(self, pending: PendingCheck) -> None:
        forward = (pending.entities[0].entity_id, pending.entities[1].entity_id)
        chars = self.config.prompt_description_chars
        records = [directed_record(r, forward, chars) for r in [*pending.olds, pending.new]]
        certain = certain_pairs(len(pending.olds), [(len(pending.olds), pending.pairs)])
        await self.canary_desk.after_pairwise(self.llm, records, certain, pending.entities)

    async def _ask_llm(
        self,
        new: ExtractedRelation,
        olds: list[ExtractedRelation],
        pairs: list[PairDecision],
        entities: tuple[EntityContext, EntityContext],
    ) -> Verdict | NoLLMVerdict:
        forward = (entities[0].entity_id, entities[1].entity_id)
        try:
            outcome, _ = await ask_judge(
                self.llm,
                [directed_record(r, forward, self.config.prompt_description_chars) for r in olds],
                directed_record(new, forward, self.config.prompt_description_chars),
                entities,
                self.config,
            )
        except GroupFailed as error:
            return failure_of(error)
        if outcome.verdict == "unsure":
            return UNSURE
        if outcome.verdict == "merge" and outcome.duplicate_of is not None:
            index = next(i for i, r in enumerate(olds) if r.relation_id == outcome.duplicate_of)
            return llm_merge(
                pairs[index], outcome.duplicate_of, outcome.reason, "the LLM said merge"
            )
        best = max(pairs, key=lambda p: p.scores["cosine"])
        return Verdict(decision="keep_both", tier="llm", scores=best.scores, reason=outcome.reason)

    async def clarify(
        self, pending: PendingCheck, reason: str, why: NoLLMVerdict | None = None
    ) -> Verdict:
        """A person (the clarifier), else the policy; ``why`` the LLM did not decide goes
        into the verdict (``llm_outcome``, ``llm_error``) and the question's reason."""
        new, olds, entities, scores = pending.new, pending.olds, pending.entities, pending.scores
        why = why or NoLLMVerdict("not_asked", reason)
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
                llm_outcome=why.outcome,
                llm_error=why.error,
            )
        decision = self.config.unsure_policy
        return Verdict(
            decision=decision,
            tier="policy",
            scores=scores,
            matched_relation_id=match.relation_id if decision == "merge" else None,
            reason=f"{reason}; no answer, the policy decided",
            question_id=question["id"],
            llm_outcome=why.outcome,
            llm_error=why.error,
        )
