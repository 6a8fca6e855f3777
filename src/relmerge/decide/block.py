"""Deciding one block: tiers, constrained merging, then the LLM for what is left.

The block's units are first clustered by the tiers' automatic merges (strongest first,
never across a keep). If undecided pairs remain between clusters and an LLM is available,
the clusters go to it — one request per batch of at most ``semantic_batch_size`` records
(a pairwise verdict for two, unless they share one exact key: see :func:`writes_text`),
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
from relmerge.decide.canary import Canary, block_candidates
from relmerge.decide.canary_mix import EVERY_KIND, CertainPair, Mixed, certain_pairs, mix
from relmerge.decide.clarify import clarification
from relmerge.decide.clustering import ConstrainedClusters
from relmerge.decide.memory import Remembered, remembered
from relmerge.decide.merged import joined_description
from relmerge.decide.pack import Mixer, Packed, Ticket
from relmerge.decide.retry import FAILED, UNAVAILABLE, Attempts, GroupFailed
from relmerge.decide.tiers import PairDecision
from relmerge.model import Decision, EntityContext
from relmerge.normalize import exact_key
from relmerge.prompts import cluster_many, cluster_relations, judge_pair
from relmerge.prompts.base import truncate
from relmerge.prompts.context import directed_record
from relmerge.providers.base import LanguageModel, LLMResult, hear_canaries
from relmerge.units import Originals, Unit, member_ids


def _shape(batch: Sequence[Sequence[int]]) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(cluster) for cluster in batch)


def writes_text(units: Sequence[Unit], batch: Sequence[Sequence[int]]) -> bool:
    """Whether the answer about ``batch`` writes the merged relation (a mapping table
    with its ``relation_list``) or a verdict only (a pair, asked as ``relation_judge``).

    Several records always get a mapping table. Two records get a verdict, unless they
    share one exact key: that is the exact stage's question (``relation_merge`` with the
    semantic stage off), so the model writes its merged text here too, and the group
    comes out the same whichever request decided it (DESIGN §2: the model's validated
    merged text, else the members' texts joined)."""
    if len(batch) > 2:
        return True
    return len({exact_key(units[m].relation) for cluster in batch for m in cluster}) == 1


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
    questions: int = 0  # requests this block sent the LLM (retries included)
    canaries: list[Canary] = field(default_factory=list)  # certain pairs it offers
    # How the model answered the canaries mixed into its requests (``canary_mix``), in
    # the order asked (None: unsure); ``bare_questions``: requests that carried none.
    canary_answers: list[bool | None] = field(default_factory=list)
    bare_questions: int = 0


@dataclass(frozen=True)
class _Block:
    """One block as its LLM rounds see it: its units, the entities of its pair, the
    tiers' scores by pair and which units' names are symmetric (see :func:`cluster_lead`)."""

    units: Sequence[Unit]
    entities: tuple[EntityContext, EntityContext]
    scores: dict[tuple[int, int], dict[str, float]]
    symmetric: Sequence[bool]
    certain: Sequence[CertainPair] = ()  # pairs to mix into its requests as canaries
    ticket: Ticket | None = None  # its first question may go in a packed request


@dataclass
class _Rounds:
    """The bookkeeping of one block's LLM rounds.

    ``final`` holds the clusters (automatic merges, then the LLM's; hard keeps forbid);
    ``pending`` the pairs the tiers left undecided. A pair is ``judged`` once a valid
    answer covered it or it was given up, ``answered`` only in the first case (the rest
    go to review). ``failed_once``: pairs of a batch whose answer was invalid once (they
    get one re-ask); ``failed_orders``: batches, as ordered, whose answer was invalid (a
    re-ask sends them reversed); ``spent``: requests sent per batch (its members).
    """

    final: ConstrainedClusters
    hard: set[tuple[int, int]]
    pending: dict[tuple[int, int], PairDecision]
    judged: set[tuple[int, int]] = field(default_factory=set)
    answered: set[tuple[int, int]] = field(default_factory=set)
    failed_once: set[tuple[int, int]] = field(default_factory=set)
    failed_orders: set[tuple[tuple[int, ...], ...]] = field(default_factory=set)
    spent: dict[frozenset[int], int] = field(default_factory=dict)

    def open_pairs(self) -> list[tuple[int, int]]:
        """Pending pairs not judged yet whose units are still in different clusters."""
        final = self.final
        return [
            pair
            for pair in self.pending
            if pair not in self.judged and final.find(pair[0]) != final.find(pair[1])
        ]

    def batches(self, round_number: int, size: int) -> list[list[list[int]]]:
        """This round's batches of clusters: the clusters in an order rotated each round
        (so that other clusters share a batch), ``size`` clusters at most per batch."""
        current = self.final.clusters()
        # A cluster bound to every other one by hard keeps (reversed direction, an
        # earlier split) is settled: the model could not change it, so it is not sent.
        current = [
            c
            for c in current
            if any(
                (min(x, y), max(x, y)) not in self.hard
                for d in current
                if d is not c
                for x in c
                for y in d
            )
        ]
        shift = (round_number - 1) * (size // 2)
        order = current[shift % len(current) :] + current[: shift % len(current)]
        return [order[i : i + size] for i in range(0, len(order), size)]

    def covered(self, members: set[int]) -> bool:
        """A valid answer covered every pair of ``members``: whether any is newly judged."""
        progress = False
        for pair in combinations(sorted(members), 2):
            self.answered.add(pair)
            if pair not in self.judged:
                self.judged.add(pair)
                progress = True
        return progress


@dataclass(frozen=True)
class _Answer:
    """A validated answer about a batch: merged groups and unsure groups (positions in
    the batch), the fields the LLM wrote for a merged group (by group position), its
    reason (a pairwise verdict's), the model's result and the prompt it answered."""

    groups: list[list[int]]
    unsure: list[list[int]]
    fields: dict[int, dict[str, Any]]
    reason: str | None
    result: LLMResult
    prompt: str  # the prompt and its version that was answered
    canaries: list[bool | None] = field(default_factory=list)  # the mixed canaries' answers
    bare: bool = False  # asked alone with no canary while canaries were wanted


class BlockDecider:
    def __init__(
        self,
        config: DeduplicateRelationsConfig,
        llm: LanguageModel,
        originals: Originals,
        limit: asyncio.Semaphore,
        memory: Remembered | None = None,
        canaries: bool = True,
    ) -> None:
        self.config = config
        self.llm = llm
        self.originals = originals
        self._limit = limit
        self.memory = memory
        # Whether this chunk's requests carry canaries: what the run's verdict said when the
        # chunk was handed out (fixed for the chunk, so that the same chunk sends the same
        # requests on a re-run, and its cached answers serve them).
        self.canaries_wanted = canaries

    @property
    def canaries_on(self) -> bool:
        return self.config.canaries > 0 and self.canaries_wanted

    @property
    def limit(self) -> asyncio.Semaphore:
        """The bound on the LLM requests in flight (a packer shares it)."""
        return self._limit

    def _ids(self, units: Sequence[Unit]) -> list[str]:
        return member_ids(units, self.originals)

    async def decide(
        self,
        units: Sequence[Unit],
        pairs: Sequence[PairDecision],
        entities: tuple[EntityContext, EntityContext],
        symmetric: Sequence[bool] = (),
        ticket: Ticket | None = None,
    ) -> BlockResult:
        """``symmetric`` flags each unit whose name is symmetric (see :func:`cluster_lead`);
        ``ticket``: the block's first question may be packed with others (``decide.pack``)."""
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
        if self.canaries_on and self.llm.available:
            forward = (entities[0].entity_id, entities[1].entity_id)
            result.canaries = block_candidates(
                units,
                pairs,
                lambda i: self._record(units, [i], forward, symmetric)[0],
                entities,
            )
        if not pending:
            result.clusters = auto.clusters()
            return result
        if not self.llm.available:
            result.clusters = auto.clusters()
            self._for_review(units, pending.values(), entities, result, "no language model")
            return result
        rounds = _Rounds(ConstrainedClusters(len(units)), set(hard), pending)
        for a, b in hard:
            rounds.final.forbid(a, b)
        for a, b in joined:
            rounds.final.join(a, b)
        certain: list[CertainPair] = []
        if self.config.canaries > 0:
            certain = certain_pairs(units, pairs, self.originals)
        block = _Block(units, entities, scores, symmetric, certain, ticket)
        return await self._ask(block, rounds, result)

    async def _ask(self, block: _Block, rounds: _Rounds, result: BlockResult) -> BlockResult:
        """The LLM rounds: each asks, for at most ``semantic_batch_count`` batches, about
        the clusters that still have an open pair; a round that judges nothing new ends
        them, and so does a failure no retry can mend."""
        max_attempts = self.config.max_attempts
        while result.rounds < self.config.max_rounds:
            open_pairs = rounds.open_pairs()
            if not open_pairs:
                break
            result.rounds += 1
            sent = 0
            progress = False
            for batch in rounds.batches(result.rounds, self.config.semantic_batch_size):
                members = {m for cluster in batch for m in cluster}
                if not any(a in members and b in members for a, b in open_pairs):
                    continue
                if rounds.spent.get(frozenset(members), 0) >= max_attempts:
                    rounds.judged |= set(combinations(sorted(members), 2))  # given up
                    continue
                if sent >= self.config.semantic_batch_count:
                    break
                sent += 1
                step = await self._try_batch(block, batch, members, rounds, result)
                if step is None:  # budget spent, endpoint unavailable or failing: stop
                    return self._finish(block, rounds, result)
                progress |= step
            if not progress:
                break
        return self._finish(block, rounds, result)

    async def _try_batch(
        self,
        block: _Block,
        batch: list[list[int]],
        members: set[int],
        rounds: _Rounds,
        result: BlockResult,
    ) -> bool | None:
        """Ask about one batch: whether the round progressed (pairs newly judged, or a
        failure that leaves a re-ask), or None when asking must stop.

        ``max_attempts`` bounds the requests about one batch, its re-ask included: once an
        answer was invalid, the first ask keeps the last attempt for a re-ask in another
        order (the same request would get the same answer: temperature 0, cache)."""
        max_attempts = self.config.max_attempts
        key = frozenset(members)
        used = rounds.spent.get(key, 0)
        if _shape(batch) in rounds.failed_orders:
            batch = batch[::-1]
        rounds.failed_orders.add(_shape(batch))
        attempts = Attempts(max_attempts - used, keep=1 if used == 0 else 0)
        try:
            await self._ask_batch(block, batch, rounds.final, result, attempts)
            rounds.failed_orders.discard(_shape(batch))
        except GroupFailed as failure:
            batch_pairs = set(combinations(sorted(members), 2))
            if failure.code != FAILED or not failure.invalid_answers:
                result.failure = failure
                return None
            # A model that answered badly gets its last attempt for these pairs in the next
            # round (a fresh request, records in another order); then they are given up
            # and the block records the failure. An answer is worth the re-ask: a failed
            # block loses every merge only the LLM could make.
            if batch_pairs <= rounds.failed_once or used + attempts.used >= max_attempts:
                result.failure = failure
                rounds.judged |= batch_pairs
            rounds.failed_once |= batch_pairs
            return True
        finally:
            rounds.spent[key] = used + attempts.used
        return rounds.covered(members)

    def _finish(self, block: _Block, rounds: _Rounds, result: BlockResult) -> BlockResult:
        """The block's clusters; the pairs no valid answer covered go to review."""
        final = rounds.final
        result.clusters = final.clusters()
        result.questions = sum(rounds.spent.values())
        left = [
            p
            for pair, p in rounds.pending.items()
            if pair not in rounds.answered and final.find(pair[0]) != final.find(pair[1])
        ]
        if result.failure is not None and result.failure.code == UNAVAILABLE:
            # Written as a run without an LLM writes them; a re-run asks them.
            cause = f"the LLM was unavailable ({result.failure.reason})"
        elif result.failure is not None:
            cause = f"no valid LLM verdict ({result.failure.code}: {result.failure.reason})"
        else:
            cause = "no valid LLM verdict within max_rounds"
        self._for_review(block.units, left, block.entities, result, cause)
        return result

    def _record(
        self,
        units: Sequence[Unit],
        cluster: list[int],
        forward: tuple[str, str],
        symmetric: Sequence[bool],
        left_out: frozenset[int] = frozenset(),
    ) -> tuple[dict[str, Any], bool]:
        """The cluster as the LLM sees it, and whether it sees every member's whole text:
        a merged cluster shows the distinct descriptions of all its members (but those
        ``left_out``: canary twins shown as records of their own)."""
        members = sorted(i for c in cluster for i in units[c].members if i not in left_out)
        chars = self.config.prompt_description_chars
        record = directed_record(units[cluster_lead(cluster, symmetric)].relation, forward, chars)
        text = joined_description(self.originals[i].description for i in members)
        if len(members) > 1:
            record["description"] = truncate(text, chars)
            record["mentions"] = len(members)
            record["merged_from"] = [self.originals[i].relation_id for i in members[:5]]
        return record, len(text) <= chars

    def _mixer(self, block: _Block, batch: list[list[int]]) -> Mixer:
        """``batch``'s records with the canaries of the kinds asked (``canary_mix``),
        each variant made once."""
        units = block.units
        forward = (block.entities[0].entity_id, block.entities[1].entity_id)
        seed = [[units[u].relation.relation_id for u in cluster] for cluster in batch]
        chars = self.config.prompt_description_chars
        variants: dict[frozenset[str], Mixed] = {}

        def show(cluster: list[int], left_out: frozenset[int]) -> dict[str, Any]:
            return self._record(units, cluster, forward, block.symmetric, left_out)[0]

        def variant(kinds: frozenset[str]) -> Mixed:
            if kinds not in variants:
                variants[kinds] = mix(
                    batch,
                    block.certain,
                    show,
                    lambda member: directed_record(self.originals[member], forward, chars),
                    ("canary", seed),
                    kinds,
                )
            return variants[kinds]

        return variant

    async def _ask_batch(
        self,
        block: _Block,
        batch: list[list[int]],
        final: ConstrainedClusters,
        result: BlockResult,
        attempts: Attempts,
    ) -> None:
        """One request about ``batch`` (clusters of the block): the groups it merges are
        joined in ``final`` (hard keeps bind it), the groups it is unsure about are
        written for a person and decided by the policy."""
        units = block.units
        forward = (block.entities[0].entity_id, block.entities[1].entity_id)
        shown = [self._record(units, cluster, forward, block.symmetric) for cluster in batch]
        mixer = self._mixer(block, batch) if self.config.canaries > 0 else None
        records = [record for record, _ in shown]
        fields = writes_text(units, batch)
        answer = await self._answer(records, block, attempts, fields, mixer)
        if answer.bare:
            result.bare_questions += attempts.used
        result.canary_answers += answer.canaries
        if answer.canaries:
            await hear_canaries(self.llm, answer.canaries)
        for position, group in enumerate(answer.groups):
            members = [m for index in group for m in batch[index]]
            refused = final.join_all(members)
            applied = [m for m in members if m not in refused]
            if (
                position in answer.fields
                and len(applied) > 1
                and not refused
                and all(shown[index][1] for index in group)
            ):
                merged = MergedFields(frozenset(members), answer.fields[position])
                result.fields[min(applied)] = merged
            why = "a direction or earlier split forbids part of the group" if refused else None
            result.decisions.append(
                Decision(
                    member_ids=self._ids([units[m] for m in members]),
                    stage="semantic",
                    tier="llm",
                    verdict="merge" if not refused else "partial_merge",
                    model=answer.result.model,
                    cached=answer.result.cached,
                    prompt=answer.prompt,
                    round=result.rounds,
                    reason=answer.reason or why,
                )
            )
        for group in answer.unsure:
            members = [m for index in group for m in batch[index]]
            self._unsure(block, members, answer, final, result)

    async def _answer(
        self,
        records: list[dict[str, Any]],
        block: _Block,
        attempts: Attempts,
        fields: bool,
        mixer: Mixer | None = None,
    ) -> _Answer:
        """The LLM's validated answer about ``records``: a mapping table
        (``relation_cluster``) where it writes the merged relation (``fields``, see
        :func:`writes_text`), else a pairwise verdict (``relation_judge``); groups and
        unsure groups as positions in ``records``. With canaries (``mixer``, while they
        are wanted) it is always a mapping table, read among the real records (see
        ``canary_mix``), whose fields count only where ``fields`` says so. The block's
        first question may be answered as part of a packed request instead (which then
        chooses its canaries), read the same way."""
        entities = block.entities
        ticket = block.ticket
        if ticket is not None and (packer := ticket.take()) is not None:
            offered = mixer if self.canaries_on else None
            part = await packer.ask(ticket.index, records, entities, offered)
            packed = self._packed(part, fields, attempts)
            if packed is not None:
                return packed
        async with self._limit:
            mixed = mixer(EVERY_KIND) if mixer is not None and self.canaries_on else None
            if mixed is not None and mixed.checks:
                return await self._answer_mixed(mixed, fields, entities, attempts)
            bare = self.canaries_on
            if not fields:
                verdict, result = await ask_judge(
                    self.llm, records[:1], records[1], entities, self.config, attempts
                )
                return _Answer(
                    groups=[[0, 1]] if verdict.verdict == "merge" else [],
                    unsure=[[0, 1]] if verdict.verdict == "unsure" else [],
                    fields={},
                    reason=verdict.reason,
                    result=result,
                    prompt=judge_pair.PROMPT,
                    bare=bare,
                )
            outcome, result = await ask_cluster(self.llm, records, entities, self.config, attempts)
            return _Answer(
                outcome.groups,
                outcome.unsure,
                outcome.fields,
                None,
                result,
                cluster_relations.PROMPT,
                bare=bare,
            )

    def _packed(self, part: Packed | None, fields: bool, attempts: Attempts) -> _Answer | None:
        """A block's part of a packed answer as its own answer would be (its fields only
        where its own question writes them: ``fields``); None when the block asks alone:
        it was alone in its pack, the pack timed out, or its part was invalid (the packed
        request then counts as one of its attempts)."""
        if part is None or part.timed_out:
            return None
        attempts.take()
        if part.outcome is None or part.result is None:
            if attempts.left == 0:
                raise GroupFailed(part.problem, invalid_answers=1)
            return None
        outcome, mixed = part.outcome, part.mixed
        groups, unsure, canaries = outcome.groups, outcome.unsure, []
        if mixed is not None:
            groups, unsure = mixed.real(groups), mixed.real(unsure)
            canaries = mixed.answers(outcome)
        written = outcome.fields if fields else {}
        return _Answer(groups, unsure, written, None, part.result, cluster_many.PROMPT, canaries)

    async def _answer_mixed(
        self,
        mixed: Mixed,
        fields: bool,
        entities: tuple[EntityContext, EntityContext],
        attempts: Attempts,
    ) -> _Answer:
        """A mapping table about ``mixed``: groups as batch positions, canaries answered.
        A pair asked this way writes no fields unless its own question would
        (``fields``, see :func:`writes_text`)."""
        outcome, result = await ask_cluster(
            self.llm, mixed.records, entities, self.config, attempts, mixed.canary
        )
        return _Answer(
            mixed.real(outcome.groups),
            mixed.real(outcome.unsure),
            outcome.fields if fields else {},
            None,
            result,
            cluster_relations.PROMPT,
            mixed.answers(outcome),
        )

    def _unsure(
        self,
        block: _Block,
        members: list[int],
        answer: _Answer,
        final: ConstrainedClusters,
        result: BlockResult,
    ) -> None:
        """A group the LLM was unsure about: a question for a person, the policy meanwhile."""
        units = block.units
        relations = [units[m].relation for m in members]
        ids = self._ids([units[m] for m in members])
        pair_scores = [
            block.scores[p] for p in combinations(sorted(members), 2) if p in block.scores
        ]
        best = {
            key: max(s[key] for s in pair_scores)
            for key in ("fuzzy", "cosine", "name_cosine")
            if pair_scores
        }
        policy = self.config.unsure_policy
        result.clarifications.append(
            clarification(relations, ids, block.entities, best, answer.reason, policy)
        )
        if policy == "merge":
            final.join_all(members)
        result.decisions.append(
            Decision(
                member_ids=ids,
                stage="semantic",
                tier="policy",
                verdict=policy,
                model=answer.result.model,
                cached=answer.result.cached,
                prompt=answer.prompt,
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
