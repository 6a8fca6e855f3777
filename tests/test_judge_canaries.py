"""The incremental judge's canaries: its model measured over a rolling window.

A model that answers its certain questions right changes no verdict; a model at chance is
distrusted once the window holds enough wrong answers, and from then on its merges stop:
checks go to the clarifier (or the policy) with the reason, and it is asked nothing more.
"""

from __future__ import annotations

import random
from typing import Any

from relmerge import DeduplicateRelationsConfig, JudgeContext, RelationJudge
from relmerge.normalize import normalize_description
from relmerge.providers.base import LLMRequest
from relmerge.providers.embedding import HashEmbedder
from relmerge.providers.fake import ScriptedLLM, request_records
from relmerge.review.clarifiers import CallbackClarifier

CONTEXT = JudgeContext(source_name="Gimli", target_name="Legolas")
EXISTING = ["companion met during the Council of Elrond"]
OPEN = [  # candidates the rules leave open against EXISTING (the LLM is asked)
    "sworn rival at the start of the journey",
    "ally forged through shared battle",
    "fellow member of the Fellowship",
]
MERGED = "ally forged through shared battle"  # the one the scripted model merges


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """What a right model says: the same sentence, the same way round."""
    way = ("source_entity_name", "target_entity_name", "direction")
    return all(a.get(k) == b.get(k) for k in way) and normalize_description(
        str(a["description"])
    ) == normalize_description(str(b["description"]))


class Model:
    """Answers right (identical records together, ``MERGED`` with the existing relation)
    until ``chance_after`` requests; then at chance (a seeded coin per request: all
    together, or all apart)."""

    def __init__(self, chance_after: int | None = None) -> None:
        self.chance_after = chance_after
        self.coin = random.Random(7)
        self.llm = ScriptedLLM(self.answer)

    def at_chance(self) -> bool:
        return self.chance_after is not None and len(self.llm.requests) > self.chance_after

    def answer(self, request: LLMRequest, records: list[dict[str, Any]]) -> dict[str, Any]:
        ids = [str(r["relation_id"]) for r in records]
        if request.task == "relation_judge":
            *olds, new = records
            if self.at_chance():
                merge = self.coin.random() < 0.5
            else:
                merge = any(_same(o, new) for o in olds) or new["description"] == MERGED
            return {
                "verdict": "merge" if merge else "keep_both",
                "reason": "scripted",
                "duplicate_of": ids[0] if merge else None,
            }
        if self.at_chance():
            together = self.coin.random() < 0.5
            return {"mapping_table": {ids[0]: ids[1:]} if together else {}}
        table: dict[str, list[str]] = {}
        for i, record in enumerate(records):
            for j in range(i):
                merged = record["description"] == MERGED and records[j]["relation_id"] == (
                    "existing_1"
                )
                if _same(records[j], record) or merged:
                    table.setdefault(ids[j], []).append(ids[i])
                    break
        return {"mapping_table": table}


def _judge(model: Model, **kwargs: Any) -> RelationJudge:
    return RelationJudge(llm=model.llm, embedder=HashEmbedder(), **kwargs)


def _checks() -> list[tuple[str, list[str], JudgeContext]]:
    return [(candidate, EXISTING, CONTEXT) for candidate in OPEN]


def _shape(verdicts: list[Any]) -> list[tuple[str, str, str | None]]:
    return [(v.decision, v.tier, v.matched_relation_id) for v in verdicts]


async def test_a_model_that_answers_right_changes_no_verdict() -> None:
    off_model, on_model = Model(), Model()
    off = _judge(off_model, config=DeduplicateRelationsConfig(canaries=0))
    on = _judge(on_model)
    for _ in range(6):
        assert _shape(await on.check_many(_checks())) == _shape(await off.check_many(_checks()))
    assert _shape(await on.check_many(_checks()))[1] == ("merge", "llm", "existing_1")
    figures = on.canaries
    assert figures["in_requests"] >= 7 and figures["extra_requests"] == 0  # tokens only
    assert figures["right"] == figures["answered"] == figures["asked"]
    assert not figures["distrusted"] and figures["agreement"] == 1.0
    assert off.canaries["asked"] == 0
    # The copy and a near-miss pair ride in the request under ids of their own; the
    # answer reads real ones.
    (first, *_), (plain, *_) = on_model.llm.requests, off_model.llm.requests
    on_ids = [r["relation_id"] for r in request_records(first)]
    off_ids = [r["relation_id"] for r in request_records(plain)]
    assert len(on_ids) == len(off_ids) + 3 and set(off_ids) < set(on_ids)


async def test_a_model_at_chance_is_stopped_by_the_sequential_test() -> None:
    asked: list[dict[str, Any]] = []

    async def person(question: dict[str, Any]) -> str | None:
        asked.append(question)
        return None  # no answer: the policy decides, and nothing is remembered

    model = Model(chance_after=4)
    judge = _judge(model, clarifier=CallbackClarifier(person))
    rounds = 0
    while not judge.canaries["distrusted"]:
        rounds += 1
        assert rounds <= 60, judge.canaries
        await judge.check_many(_checks())
    figures = judge.canaries
    assert figures["verdict"] == "distrusted" and figures["decided_after"]["boundary"] == "stop"
    # Right before the coin: its first four answers were right, then enough were wrong.
    decided = figures["decided_after"]
    assert 4 <= decided["right"] < decided["answered"] <= figures["answered"]
    reason = figures["reason"]
    assert reason.startswith(
        f"the model answered {decided['right']} of {decided['answered']} certain questions right"
    )
    assert "stop boundary of Wald's sequential test" in reason
    requests = len(model.llm.requests)
    verdicts = await judge.check_many(_checks())
    single = await judge.check(MERGED, EXISTING, CONTEXT)
    assert len(model.llm.requests) == requests  # asked nothing more
    for verdict in [*verdicts, single]:
        assert verdict.llm_outcome == "distrusted" and verdict.tier == "policy"
        assert reason in verdict.reason and verdict.decision == "keep_both"
    assert reason in asked[-1]["reason"]


async def test_pairwise_checks_earn_canaries_of_their_own() -> None:
    judge = _judge(Model(), config=DeduplicateRelationsConfig(canaries=0.5))
    verdicts = [await judge.check(candidate, EXISTING, CONTEXT) for candidate in OPEN * 2]
    assert [v.decision for v in verdicts] == ["keep_both", "merge", "keep_both"] * 2
    figures = judge.canaries
    assert figures["extra_requests"] == 3 and figures["right"] == figures["answered"] == 3
    at_chance = _judge(Model(chance_after=0), config=DeduplicateRelationsConfig(canaries=1.0))
    for _ in range(60):
        verdict = await at_chance.check(MERGED, EXISTING, CONTEXT)
        if at_chance.canaries["distrusted"]:
            break
    assert at_chance.canaries["distrusted"]
    assert verdict.llm_outcome == "distrusted" and verdict.tier == "policy"
    assert verdict.question_id is not None and "certain questions right" in verdict.reason
