"""The batch form of the judge: many candidates, as few LLM requests as possible.

The tiers and remembered answers run for every check first. The checks they leave open are
grouped by pair of entities and existing relations; a group of several goes to the LLM as
one ``relation_cluster`` request (existing relations + all its candidates), a single check
as the usual pairwise ``relation_judge``. Identical checks are asked once.

A ``relation_cluster`` request carries the judge's canaries among its records
(``relmerge.judge.canaries``); once they distrust the model, its answer is not applied
and no group is asked: the checks go to the clarifier, saying why.

The LLM endpoint is checked once before the first group is asked. A cluster request that
gets no valid answer falls back to one pairwise question per check — unless the LLM could
not be asked at all (unavailable, budget spent): asking again at once would only fail
again, so each check goes to the clarifier or the policy, its verdict saying why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from relmerge.decide.ask import ask_cluster
from relmerge.decide.retry import GroupFailed
from relmerge.judge.canaries import certain_pairs
from relmerge.judge.checks import (
    JudgeContext,
    Judging,
    PendingCheck,
    RelationLike,
    Verdict,
    as_relation,
    llm_merge,
)
from relmerge.judge.outcome import UNSURE, failure_of
from relmerge.model import ExtractedRelation
from relmerge.prompts.context import directed_record

Check = tuple[RelationLike, Sequence[RelationLike], JudgeContext | None]


def _candidate(value: RelationLike, index: int, context: JudgeContext) -> ExtractedRelation:
    relation_id = f"candidate_{index + 1}"
    if isinstance(value, dict) and isinstance(value.get("relation_id"), str):
        relation_id = value["relation_id"]
    return as_relation(value, relation_id, context)


def _group_key(pending: PendingCheck) -> tuple[Any, ...]:
    entities = tuple((e.entity_id, e.name, e.profile) for e in pending.entities)
    olds = tuple((r.relation_id, r.name, r.description) for r in pending.olds)
    return entities, olds


async def check_batch(judge: Judging, checks: Sequence[Check]) -> list[Verdict]:
    verdicts: list[Verdict | None] = [None] * len(checks)
    pending: dict[int, PendingCheck] = {}
    seen: dict[str, int] = {}
    duplicates: dict[int, int] = {}
    for index, (candidate, existing, context) in enumerate(checks):
        key = repr((candidate, list(existing), context))
        if key in seen:
            duplicates[index] = seen[key]
            continue
        seen[key] = index
        context = context or JudgeContext()
        new = _candidate(candidate, index, context)
        olds = [as_relation(item, f"existing_{i + 1}", context) for i, item in enumerate(existing)]
        if not olds:
            verdicts[index] = Verdict(
                decision="keep_both", tier="policy", reason="no existing relation"
            )
            continue
        outcome = await judge.rules(new, olds, context)
        if isinstance(outcome, Verdict):
            verdicts[index] = outcome
        else:
            pending[index] = outcome
    groups: dict[tuple[Any, ...], list[int]] = {}
    for index, item in pending.items():
        groups.setdefault(_group_key(item), []).append(index)
    if groups:
        await judge.preflight_llm()  # once, before the groups ask side by side
    results = await asyncio.gather(
        *(_decide_group(judge, members, pending) for members in groups.values())
    )
    for decided in results:
        for index, verdict in decided.items():
            verdicts[index] = verdict
    for index, original in duplicates.items():
        verdicts[index] = verdicts[original]
    missing = [index for index, verdict in enumerate(verdicts) if verdict is None]
    if missing:
        raise AssertionError(f"checks {missing} got no verdict")  # an internal bug
    return [verdict for verdict in verdicts if verdict is not None]


async def _decide_group(
    judge: Judging, members: list[int], pending: dict[int, PendingCheck]
) -> dict[int, Verdict]:
    items = [pending[i] for i in members]
    ids = [item.new.relation_id for item in items] + [r.relation_id for r in items[0].olds]
    if len(items) == 1 or not judge.llm.available or len(set(ids)) != len(ids):
        return {i: await _single(judge, pending[i]) for i in members}
    desk = judge.canary_desk
    if desk.distrusted:
        return {i: await judge.clarify(pending[i], desk.why.reason, desk.why) for i in members}
    before = judge.llm.stats.requests
    first = items[0]
    forward = (first.entities[0].entity_id, first.entities[1].entity_id)
    chars = judge.config.prompt_description_chars
    records = [directed_record(r, forward, chars) for r in first.olds]
    records += [directed_record(item.new, forward, chars) for item in items]
    old_count = len(first.olds)
    opened = [(old_count + position, item.pairs) for position, item in enumerate(items)]
    certain = certain_pairs(old_count, opened)
    mixed = desk.mix(records, certain)
    try:
        outcome, _ = await ask_cluster(
            judge.llm, mixed.records, first.entities, judge.config, canary=mixed.canary
        )
    except GroupFailed as error:
        failure = failure_of(error)
        if not failure.failed:  # invalid answers: a pairwise question may do better
            return {i: await _single(judge, pending[i]) for i in members}
        spent = judge.llm.stats.requests - before
        return {
            i: (await judge.clarify(pending[i], failure.reason, failure)).model_copy(
                update={"llm_requests": spent}
            )
            for i in members
        }
    spent = judge.llm.stats.requests - before
    desk.add(mixed.answers(outcome), mixed=True)
    if desk.distrusted:  # this request's canaries tipped it: its answer is not applied
        return {
            i: (await judge.clarify(pending[i], desk.why.reason, desk.why)).model_copy(
                update={"llm_requests": spent}
            )
            for i in members
        }
    groups, unsures = mixed.real(outcome.groups), mixed.real(outcome.unsure)
    decided: dict[int, Verdict] = {}
    for position, index in enumerate(members):
        item = pending[index]
        record = old_count + position
        group = next((g for g in groups if record in g), None)
        unsure = next((g for g in unsures if record in g), None)
        matches = [m for m in (group or []) if m < old_count]
        if matches:
            verdict = llm_merge(
                item.pairs[matches[0]],
                item.olds[matches[0]].relation_id,
                "the LLM grouped it with an existing relation",
                "the LLM grouped them",
            )
        elif unsure is not None and any(m < old_count for m in unsure):
            verdict = await judge.clarify(item, UNSURE.reason, UNSURE)
        else:
            verdict = Verdict(
                decision="keep_both",
                tier="llm",
                scores=item.scores,
                reason="the LLM grouped it with no existing relation",
                llm_outcome="answered",
            )
        decided[index] = verdict.model_copy(update={"llm_requests": spent})
    return decided


async def _single(judge: Judging, pending: PendingCheck) -> Verdict:
    before = judge.llm.stats.requests
    verdict = await judge.decide(pending)
    return verdict.model_copy(update={"llm_requests": judge.llm.stats.requests - before})
