"""The exact-merge stage (seed 001, 精确合并).

Records with the same key — mapped source id, mapped target id, normalised name, normalised
type — form a group. Identical descriptions merge without an LLM; the rest of a group goes
to the LLM (task ``relation_merge``) in batches of at most ``llm_batch_size`` records, each
later batch carrying the merged result of the earlier ones ("accumulating"). A round is one
pass over every group that still holds records not known to be distinct; at most
``max_rounds`` rounds run, and a round that changes nothing ends the stage, so the loop
always terminates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.merged import joined_description
from relmerge.model import Decision, ExtractedRelation, IssueResolution, IssueSubject, StepIssue
from relmerge.normalize import ExactKey, exact_key
from relmerge.prompts import merge_relations
from relmerge.providers.base import LanguageModel
from relmerge.stages.identical import holds_pinned, merge_identical
from relmerge.stages.llm_merge import GroupFailed, ask_merge
from relmerge.units import Originals, Unit, member_ids, merge_units

Pair = frozenset[tuple[int, ...]]


def group_subject_id(relation: ExtractedRelation) -> str:
    """The seed's issue subject id: ``source name|target name|name|type`` (trimmed)."""
    return "|".join(
        (relation.source_entity_name, relation.target_entity_name, relation.name, relation.type)
    )


def _pair(left: Unit, right: Unit) -> Pair:
    return frozenset((left.members, right.members))


@dataclass
class ExactOutcome:
    units: list[Unit]
    decisions: list[Decision] = field(default_factory=list)
    issues: list[StepIssue] = field(default_factory=list)
    rounds: int = 0
    failed_group_count: int = 0
    llm_needed_group_count: int = 0

    @property
    def merge_count(self) -> int:
        """Input relations absorbed into another one by this stage."""
        return sum(len(unit.members) - 1 for unit in self.units)


@dataclass
class _GroupResult:
    units: list[Unit]
    distinct: set[Pair]
    decisions: list[Decision]
    issue: StepIssue | None = None


class ExactStage:
    """Runs the exact stage over units; the LLM is optional (``available`` flag)."""

    def __init__(
        self,
        config: DeduplicateRelationsConfig,
        llm: LanguageModel,
        originals: Originals,
        on_group_done: Callable[[int], None] = lambda n: None,
        defer_llm: bool = False,
        pinned: frozenset[int] = frozenset(),
    ) -> None:
        """``pinned``: input indices of stored relations (a merge into a store): two of
        them are known distinct from the start (never merged, never asked about)."""
        self.config = config
        self.pinned = pinned
        self.llm = llm
        self.originals = originals
        self.on_group_done = on_group_done
        # With the semantic stage on, groups that need an LLM are decided inside their
        # block's request instead: fewer requests, same outcome.
        self.defer_llm = defer_llm
        self._limit = asyncio.Semaphore(config.concurrency)
        self._keys: dict[tuple[int, ...], ExactKey] = {}

    async def run(self, units: Sequence[Unit]) -> ExactOutcome:
        outcome = ExactOutcome(units=[])
        groups = self._group(units)
        current: list[Unit] = []
        for group in groups.values():
            merged_units, buckets = merge_identical(group, self.originals, self.pinned)
            current.extend(merged_units)
            for bucket in buckets:
                outcome.decisions.append(self._identical_decision(bucket, merged_units))
        current.sort(key=lambda unit: unit.first)
        if self.defer_llm or not self.llm.available:
            self.on_group_done(len(groups))
        if self.defer_llm:
            outcome.units = current
            return outcome
        if not self.llm.available:
            outcome.units = current
            for group in self._pending(current, self._stored_pairs(current)):
                outcome.llm_needed_group_count += 1
                outcome.decisions.append(
                    Decision(
                        member_ids=member_ids(group, self.originals),
                        stage="exact",
                        tier="policy",
                        verdict="llm_needed",
                        output_ids=[unit.relation.relation_id for unit in group],
                        reason="descriptions differ and no language model is configured",
                    )
                )
            return outcome
        # Groups settled by the rules count now; the others as their first round ends.
        stored = self._stored_pairs(current)
        self.on_group_done(len(groups) - len(self._pending(current, stored)))
        return await self._run_rounds(current, outcome, stored)

    def _stored_pairs(self, units: Sequence[Unit]) -> set[Pair]:
        """Every pair of two stored relations: known distinct (decided when they came)."""
        pairs: set[Pair] = set()
        if not self.pinned:
            return pairs
        for group in self._group(units).values():  # only pairs of one group are ever asked
            stored = [unit for unit in group if holds_pinned(unit, self.pinned)]
            pairs.update(_pair(a, b) for a, b in combinations(stored, 2))
        return pairs

    async def _run_rounds(
        self, current: list[Unit], outcome: ExactOutcome, known: set[Pair]
    ) -> ExactOutcome:
        distinct: set[Pair] = set(known)
        failed_keys: set[ExactKey] = set()
        while outcome.rounds < self.config.max_rounds:
            pending = self._pending(current, distinct)
            if not pending:
                break
            outcome.rounds += 1
            results = await asyncio.gather(
                *(self._merge_group(group, outcome.rounds, distinct) for group in pending)
            )
            replaced = {unit.members for group in pending for unit in group}
            changed = False
            current = [unit for unit in current if unit.members not in replaced]
            for group, result in zip(pending, results, strict=True):
                current.extend(result.units)
                new_pairs = result.distinct - distinct
                changed = changed or len(result.units) < len(group) or bool(new_pairs)
                distinct |= result.distinct
                outcome.decisions.extend(result.decisions)
                if result.issue is not None:
                    key = exact_key(group[0].relation)
                    if key not in failed_keys:
                        failed_keys.add(key)
                        outcome.failed_group_count += 1
                        outcome.issues.append(result.issue)
            current.sort(key=lambda unit: unit.first)
            if not changed:
                break
        outcome.units = current
        return outcome

    def _group(self, units: Sequence[Unit]) -> dict[ExactKey, list[Unit]]:
        groups: dict[ExactKey, list[Unit]] = {}
        for unit in units:
            key = self._keys.get(unit.members)
            if key is None:
                key = self._keys[unit.members] = exact_key(unit.relation)
            groups.setdefault(key, []).append(unit)
        return groups

    def _pending(self, units: Sequence[Unit], distinct: set[Pair]) -> list[list[Unit]]:
        """Groups with at least one pair of units not yet known to be distinct."""
        return [
            group
            for group in self._group(units).values()
            if any(_pair(a, b) not in distinct for a, b in combinations(group, 2))
        ]

    async def _merge_group(
        self, group: list[Unit], round_number: int, known: set[Pair] | None = None
    ) -> _GroupResult:
        """One accumulating pass over a group; on failure the group keeps its units.

        Batches are built around a leader: the first part (in input order) that has not led
        yet and still has an undecided pair, with up to ``llm_batch_size - 1`` parts it has
        not been compared with. A merge's result is a new part that leads in its turn, so a
        later batch receives the merged result of the earlier ones, and every pair of the
        group ends up compared or known distinct (parts carried out of a full batch are not
        left behind). A part merged from members known distinct from another part is
        distinct from it too, so nothing is asked twice.
        """
        batch_size = self.config.llm_batch_size
        parts = sorted(group, key=lambda unit: unit.first)
        distinct: set[Pair] = set(known or ())
        led: set[tuple[int, ...]] = set()
        decisions: list[Decision] = []

        def undecided(a: Unit, b: Unit) -> bool:
            return _pair(a, b) not in distinct

        while True:
            leader = next(
                (
                    unit
                    for unit in parts
                    if unit.members not in led
                    and any(undecided(unit, other) for other in parts if other is not unit)
                ),
                None,
            )
            if leader is None:
                break
            led.add(leader.members)
            partners = self._one_stored(
                leader, [u for u in parts if u is not leader and undecided(leader, u)]
            )
            # A batch of one could merge nothing: with llm_batch_size = 1 each batch is the
            # leader (the accumulated result) and one record, as in Heta.
            batch = sorted(
                [leader, *partners[: max(1, batch_size - 1)]], key=lambda unit: unit.first
            )
            try:
                async with self._limit:
                    answer, result = await ask_merge(self.llm, batch, self.config)
            except GroupFailed as failure:
                self._group_done(round_number)
                return self._failed(group, failure, round_number)
            in_batch = {unit.members for unit in batch}
            rest = [unit for unit in parts if unit.members not in in_batch]
            results = []
            for part in answer:
                members = [unit for unit in batch if unit.relation.relation_id in part.relation_ids]
                merged = merge_units(members, self.originals, self._fields(members, part.fields))
                for other in rest:
                    if any(_pair(member, other) in distinct for member in members):
                        distinct.add(_pair(merged, other))
                results.append(merged)
            distinct |= {_pair(a, b) for a, b in combinations(results, 2)}
            parts = sorted(rest + results, key=lambda unit: unit.first)
            decisions.append(
                Decision(
                    member_ids=member_ids(batch, self.originals),
                    stage="exact",
                    tier="llm",
                    verdict="merge" if len(results) == 1 else "split",
                    output_ids=[unit.relation.relation_id for unit in results],
                    model=result.model,
                    cached=result.cached,
                    round=round_number,
                    prompt=merge_relations.PROMPT,
                )
            )
        self._group_done(round_number)
        learnt = {pair for pair in distinct if pair not in (known or set())}
        return _GroupResult(parts, learnt, decisions)

    def _one_stored(self, leader: Unit, partners: list[Unit]) -> list[Unit]:
        """``partners`` less any stored relation beyond the first one in the batch: a
        batch never shows the LLM two stored relations it could merge."""
        seen = holds_pinned(leader, self.pinned)
        kept = []
        for unit in partners:
            if holds_pinned(unit, self.pinned):
                if seen:
                    continue
                seen = True
            kept.append(unit)
        return kept

    def _group_done(self, round_number: int) -> None:
        """Progress counts a key's group once: later rounds re-form merged groups."""
        if round_number == 1:
            self.on_group_done(1)

    def _fields(self, members: list[Unit], fields: dict[str, Any]) -> dict[str, Any]:
        """The LLM's merged fields, unless it saw a member cut short: then the members'
        distinct descriptions are kept instead of its text (nothing dropped unseen)."""
        limit = self.config.prompt_description_chars
        if len(members) < 2 or all(len(u.relation.description) <= limit for u in members):
            return fields
        indices = sorted(i for unit in members for i in unit.members)
        described = joined_description(self.originals[i].description for i in indices)
        return {**fields, "description": described}

    def _failed(self, group: list[Unit], failure: GroupFailed, round_number: int) -> _GroupResult:
        representative = min(group, key=lambda unit: unit.first).relation
        issue = StepIssue(
            subject=IssueSubject(type="dedup_group", id=group_subject_id(representative)),
            code=failure.code,
            severity="warning",
            message=failure.reason,
            resolution=IssueResolution(
                action="kept_original_records",
                outcome="The group was not merged, and original records were kept.",
            ),
        )
        decision = Decision(
            member_ids=member_ids(group, self.originals),
            stage="exact",
            tier="llm",
            verdict="failed",
            output_ids=[unit.relation.relation_id for unit in group],
            model=self.llm.name,
            round=round_number,
            reason=failure.reason,
            prompt=merge_relations.PROMPT,
        )
        # Known distinct from now on: a failed group is not retried in later rounds.
        distinct = {_pair(a, b) for a, b in combinations(group, 2)}
        return _GroupResult(list(group), distinct, [decision], issue)

    def _identical_decision(self, bucket: list[Unit], merged: list[Unit]) -> Decision:
        members = {index for unit in bucket for index in unit.members}
        output = next(unit for unit in merged if set(unit.members) == members)
        return Decision(
            member_ids=member_ids(bucket, self.originals),
            stage="exact",
            tier="identical",
            verdict="merge",
            output_ids=[output.relation.relation_id],
            reason="identical descriptions after normalisation",
        )
