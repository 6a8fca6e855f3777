"""Deciding one block: tiers, constrained merging, then the LLM for what is left.

The block's units are first clustered by the tiers' automatic merges (strongest first,
never across a keep). If undecided pairs remain between clusters and an LLM is available,
the clusters go to it — one request per batch of at most ``semantic_batch_size`` records,
``semantic_batch_count`` batches per round; each batch marks its pairs as judged, so every
round makes progress and the loop ends. Hard keeps (known direction, other endpoints,
earlier splits) bind the LLM too; its merges across soft keeps (guards, low scores, a
direction nobody knew) are accepted: it saw the records, their directions and the profiles.
With no LLM, every undecided pair stays apart and is written for review.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.ask import ask_cluster, ask_judge
from relmerge.decide.clarify import clarification
from relmerge.decide.clustering import ConstrainedClusters
from relmerge.decide.memory import Remembered, remembered
from relmerge.decide.merged import joined_description
from relmerge.decide.retry import FAILED, UNAVAILABLE, Attempts, GroupFailed
from relmerge.decide.tiers import PairDecision
from relmerge.model import Decision, EntityContext
from relmerge.prompts.base import truncate
from relmerge.prompts.context import directed_record
from relmerge.providers.base import LanguageModel
from relmerge.units import Originals, Unit, member_ids


def _shape(batch: Sequence[Sequence[int]]) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(cluster) for cluster in batch)


def cluster_lead(cluster: Sequence[int], symmetric: Sequence[bool]) -> int:
    """The member a merged cluster is shown and written as: its first directed member, or
    its first member when every name is symmetric (or ``symmetric`` is not given).

    A symmetric relation may merge with directed ones of either direction; if the merged
    relation showed the symmetric one, it would hide its directed members, and a later
    look (the next round, or relmerge run on its own output) could merge it with a
    reversed directed relation that a hard direction keep had kept apart. Shown as its
    directed member, the direction keep still binds. Within one cluster the directed
    members all share one direction (any reversed directed pair is a hard keep).
    """
    return next((i for i in cluster if i < len(symmetric) and not symmetric[i]), cluster[0])


@dataclass(frozen=True)
class MergedFields:
    """An LLM's merged fields and the units it saw whole when it wrote them: they stand
    for a cluster only if the cluster is exactly those units (see ``relmerge.decide.merged``)."""

    members: frozenset[int]
    fields: dict[str, Any]


@dataclass
class BlockResult:
    clusters: list[list[int]]  # local unit indices
    fields: dict[int, MergedFields] = field(default_factory=dict)  # first member -> fields
    decisions: list[Decision] = field(default_factory=list)
    clarifications: list[dict[str, Any]] = field(default_factory=list)
    rounds: int = 0
    llm_needed_pairs: int = 0
    # Why the rules left each of those pairs: its tier ("direction_unknown", "guard",
    # "band"), and how many of them had names that prove nothing (description mode).
    llm_needed_tiers: dict[str, int] = field(default_factory=dict)
    llm_needed_without_names: int = 0
    # Pairs (local unit indices) whose remembered "merge" (a person's answer) joined two
    # clusters: the merges a person made.
    human_joins: list[tuple[int, int]] = field(default_factory=list)
    failure: GroupFailed | None = None


class BlockDecider:
    def __init__(
        self,
        config: DeduplicateRelationsConfig,
        llm: LanguageModel,
        originals: Originals,
        limit: asyncio.Semaphore,
        memory: Remembered | None = None,
    ) -> None:
        self.config = config
        self.llm = llm
        self.originals = originals
        self._limit = limit
        self.memory = memory

    def _ids(self, units: Sequence[Unit]) -> list[str]:
        return member_ids(units, self.originals)

    async def decide(
        self,
        units: Sequence[Unit],
        pairs: Sequence[PairDecision],
        entities: tuple[EntityContext, EntityContext],
        symmetric: Sequence[bool] = (),
    ) -> BlockResult:
        """``symmetric`` flags each unit whose name is symmetric (see :func:`cluster_lead`)."""
        pairs = remembered(pairs, [u.relation for u in units], entities, self.memory)
        hard = [(p.a, p.b) for p in pairs if p.verdict == "keep" and p.hard]
        scores = {(p.a, p.b): p.scores for p in pairs}
        result = BlockResult(clusters=[])
        auto = ConstrainedClusters(len(units))
        for p in pairs:
            if p.verdict == "keep":
                auto.forbid(p.a, p.b)
        merges = sorted(
            (p for p in pairs if p.verdict == "merge"),
            key=lambda p: -(p.scores["fuzzy"] / 100 + p.scores["cosine"]),
        )
        joined: list[tuple[int, int]] = []
        for p in merges:
            apart = auto.find(p.a) != auto.find(p.b)
            ok = auto.join(p.a, p.b)
            if ok:
                joined.append((p.a, p.b))
                if apart and p.tier == "remembered":
                    result.human_joins.append((p.a, p.b))
            result.decisions.append(self._pair_decision(units, p, ok))
        for p in pairs:
            if p.verdict == "keep":
                result.decisions.append(self._pair_decision(units, p, False))
        pending = {
            (p.a, p.b): p
            for p in pairs
            if p.verdict == "undecided" and auto.find(p.a) != auto.find(p.b)
        }
        if not pending:
            result.clusters = auto.clusters()
            return result
        if not self.llm.available:
            result.clusters = auto.clusters()
            self._for_review(units, pending.values(), entities, result, "no language model")
            return result
        return await self._ask(
            units, hard, joined, pending, auto.clusters(), entities, result, scores, symmetric
        )

    async def _ask(
        self,
        units: Sequence[Unit],
        hard: list[tuple[int, int]],
        joined: list[tuple[int, int]],
        pending: dict[tuple[int, int], PairDecision],
        clusters: list[list[int]],
        entities: tuple[EntityContext, EntityContext],
        result: BlockResult,
        scores: dict[tuple[int, int], dict[str, float]],
        symmetric: Sequence[bool],
    ) -> BlockResult:
        final = ConstrainedClusters(len(units))
        hard_set = set(hard)
        for a, b in hard:
            final.forbid(a, b)
        for a, b in joined:
            final.join(a, b)
        judged: set[tuple[int, int]] = set()
        answered: set[tuple[int, int]] = set()  # covered by a valid answer
        failed_once: set[tuple[int, int]] = set()
        failed_orders: set[tuple[tuple[int, ...], ...]] = set()
        spent: dict[frozenset[int], int] = {}  # requests sent per batch (its members)
        max_attempts = self.config.max_attempts
        batch_size = self.config.semantic_batch_size
        while result.rounds < self.config.max_rounds:
            current = final.clusters()
            open_pairs = [
                pair
                for pair in pending
                if pair not in judged and final.find(pair[0]) != final.find(pair[1])
            ]
            if not open_pairs:
                break
            result.rounds += 1
            # A cluster bound to every other one by hard keeps (reversed direction, an
            # earlier split) is settled: the model could not change it, so it is not sent.
            current = [
                c
                for c in current
                if any(
                    (min(x, y), max(x, y)) not in hard_set
                    for d in current
                    if d is not c
                    for x in c
                    for y in d
                )
            ]
            # Rotate the order each round so that other clusters share a batch.
            shift = (result.rounds - 1) * (batch_size // 2)
            order = current[shift % len(current) :] + current[: shift % len(current)]
            batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
            sent = 0
            progress = False
            for batch in batches:
                members = {m for cluster in batch for m in cluster}
                if not any(a in members and b in members for a, b in open_pairs):
                    continue
                # max_attempts bounds the requests about one batch, its re-ask included:
                # once an answer was invalid, the first ask keeps the last attempt for a
                # re-ask in another order.
                key = frozenset(members)
                used = spent.get(key, 0)
                if used >= max_attempts:  # asked max_attempts times already: given up
                    judged |= set(combinations(sorted(members), 2))
                    continue
                if sent >= self.config.semantic_batch_count:
                    break
                sent += 1
                if _shape(batch) in failed_orders:
                    # The same request would get the same answer (temperature 0, cache).
                    batch = batch[::-1]
                failed_orders.add(_shape(batch))
                attempts = Attempts(max_attempts - used, keep=1 if used == 0 else 0)
                try:
                    await self._ask_batch(
                        units, batch, entities, final, result, scores, symmetric, attempts
                    )
                    failed_orders.discard(_shape(batch))
                except GroupFailed as failure:
                    batch_pairs = set(combinations(sorted(members), 2))
                    if failure.code != FAILED or not failure.invalid_answers:
                        # Budget spent, endpoint unavailable or failing: stop here.
                        result.failure = failure
                        return self._finish(units, pending, answered, final, entities, result)
                    # A model that answered badly gets its last attempt for these pairs in
                    # the next round (a fresh request, records in another order, so not the
                    # same request); then they are given up and the block records the
                    # failure. An answer is worth the re-ask: a failed block loses every
                    # merge only the LLM could make.
                    if batch_pairs <= failed_once or used + attempts.used >= max_attempts:
                        result.failure = failure
                        judged |= batch_pairs
                    failed_once |= batch_pairs
                    progress = True
                    continue
                finally:
                    spent[key] = used + attempts.used
                for a, b in combinations(sorted(members), 2):
                    answered.add((a, b))
                    if (a, b) not in judged:
                        judged.add((a, b))
                        progress = True
            if not progress:
                break
        return self._finish(units, pending, answered, final, entities, result)

    def _finish(
        self,
        units: Sequence[Unit],
        pending: dict[tuple[int, int], PairDecision],
        answered: set[tuple[int, int]],
        final: ConstrainedClusters,
        entities: tuple[EntityContext, EntityContext],
        result: BlockResult,
    ) -> BlockResult:
        """The block's clusters; the pairs no valid answer covered go to review."""
        result.clusters = final.clusters()
        left = [
            p
            for pair, p in pending.items()
            if pair not in answered and final.find(pair[0]) != final.find(pair[1])
        ]
        if result.failure is not None and result.failure.code == UNAVAILABLE:
            # Written as a run without an LLM writes them; a re-run asks them.
            cause = f"the LLM was unavailable ({result.failure.reason})"
        elif result.failure is not None:
            cause = f"no valid LLM verdict ({result.failure.code}: {result.failure.reason})"
        else:
            cause = "no valid LLM verdict within max_rounds"
        self._for_review(units, left, entities, result, cause)
        return result

    def _record(
        self,
        units: Sequence[Unit],
        cluster: list[int],
        forward: tuple[str, str],
        symmetric: Sequence[bool],
    ) -> tuple[dict[str, Any], bool]:
        """The cluster as the LLM sees it, and whether it sees every member's whole text:
        a merged cluster shows the distinct descriptions of all its members."""
        members = sorted(i for c in cluster for i in units[c].members)
        chars = self.config.prompt_description_chars
        record = directed_record(units[cluster_lead(cluster, symmetric)].relation, forward, chars)
        text = joined_description(self.originals[i].description for i in members)
        if len(members) > 1:
            record["description"] = truncate(text, chars)
            record["mentions"] = len(members)
            record["merged_from"] = [self.originals[i].relation_id for i in members[:5]]
        return record, len(text) <= chars

    async def _ask_batch(
        self,
        units: Sequence[Unit],
        batch: list[list[int]],
        entities: tuple[EntityContext, EntityContext],
        final: ConstrainedClusters,
        result: BlockResult,
        scores: dict[tuple[int, int], dict[str, float]],
        symmetric: Sequence[bool],
        attempts: Attempts,
    ) -> None:
        forward = (entities[0].entity_id, entities[1].entity_id)
        shown = [self._record(units, cluster, forward, symmetric) for cluster in batch]
        records = [record for record, _ in shown]
        groups: list[list[int]]
        unsure: list[list[int]]
        fields: dict[int, dict[str, Any]] = {}
        reason: str | None = None
        async with self._limit:
            if len(batch) == 2:
                verdict, answer = await ask_judge(
                    self.llm, records[:1], records[1], entities, self.config, attempts
                )
                groups = [[0, 1]] if verdict.verdict == "merge" else []
                unsure = [[0, 1]] if verdict.verdict == "unsure" else []
                reason = verdict.reason
            else:
                outcome, answer = await ask_cluster(
                    self.llm, records, entities, self.config, attempts
                )
                groups, unsure = outcome.groups, outcome.unsure
                fields = outcome.fields
        for position, group in enumerate(groups):
            members = [m for index in group for m in batch[index]]
            refused = final.join_all(members)
            applied = [m for m in members if m not in refused]
            if (
                position in fields
                and len(applied) > 1
                and not refused
                and all(shown[index][1] for index in group)
            ):
                result.fields[min(applied)] = MergedFields(frozenset(members), fields[position])
            result.decisions.append(
                Decision(
                    member_ids=self._ids([units[m] for m in members]),
                    stage="semantic",
                    tier="llm",
                    verdict="merge" if not refused else "partial_merge",
                    model=answer.model,
                    cached=answer.cached,
                    round=result.rounds,
                    reason=reason
                    or (
                        "a direction or earlier split forbids part of the group"
                        if refused
                        else None
                    ),
                )
            )
        for group in unsure:
            members = [m for index in group for m in batch[index]]
            relations = [units[m].relation for m in members]
            ids = self._ids([units[m] for m in members])
            pair_scores = [scores[p] for p in combinations(sorted(members), 2) if p in scores]
            best = {
                key: max(s[key] for s in pair_scores)
                for key in ("fuzzy", "cosine", "name_cosine")
                if pair_scores
            }
            result.clarifications.append(
                clarification(relations, ids, entities, best, reason, self.config.unsure_policy)
            )
            if self.config.unsure_policy == "merge":
                final.join_all(members)
            result.decisions.append(
                Decision(
                    member_ids=ids,
                    stage="semantic",
                    tier="policy",
                    verdict=self.config.unsure_policy,
                    model=answer.model,
                    cached=answer.cached,
                    round=result.rounds,
                    reason="the LLM was unsure; no person answered, the policy decided",
                )
            )

    def _for_review(
        self,
        units: Sequence[Unit],
        pairs: Iterable[PairDecision],
        entities: tuple[EntityContext, EntityContext],
        result: BlockResult,
        cause: str,
    ) -> None:
        """Pairs that needed the LLM and got no valid verdict stay apart (the policy) and
        are written for a person, with the reason: nothing the LLM could not finish is
        left without a question."""
        for p in pairs:
            result.llm_needed_pairs += 1
            result.llm_needed_tiers[p.tier] = result.llm_needed_tiers.get(p.tier, 0) + 1
            result.llm_needed_without_names += p.mode == "description"
            result.decisions.append(self._pair_decision(units, p, False, tier="policy"))
            why = f"{cause}; the rules could not decide (tier {p.tier}"
            why += f", guards: {', '.join(p.guards)})" if p.guards else ")"
            result.clarifications.append(
                clarification(
                    [units[p.a].relation, units[p.b].relation],
                    self._ids([units[p.a], units[p.b]]),
                    entities,
                    p.scores,
                    why,
                    self.config.unsure_policy,
                )
            )

    def _pair_decision(
        self, units: Sequence[Unit], pair: PairDecision, merged: bool, tier: str | None = None
    ) -> Decision:
        verdict = "merge" if merged else "keep_both"
        reason = None
        if pair.verdict == "merge" and not merged:
            reason = "chaining guard: the clusters hold a pair judged distinct"
        elif tier == "policy":
            reason = "undecided by the tiers and no valid LLM verdict: left for review"
        return Decision(
            member_ids=self._ids([units[pair.a], units[pair.b]]),
            stage="semantic",
            tier=tier or pair.tier,
            verdict=verdict,
            scores=pair.scores,
            guards=list(pair.guards),
            reason=reason,
        )
