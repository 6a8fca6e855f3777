"""The incremental judge: each tier, the LLM with context, people, remembered answers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from relmerge import DeduplicateRelationsConfig, JudgeContext, RelationJudge
from relmerge.providers.base import LLMRequest
from relmerge.providers.embedding import HashEmbedder
from relmerge.providers.fake import ScriptedLLM
from relmerge.review.clarifiers import CallbackClarifier, QueueClarifier
from relmerge.review.memory import AnswerMemory
from relmerge.review.queue import ReviewQueue

CONTEXT = JudgeContext(
    source_name="Gimli",
    target_name="Legolas",
    source_profile="A dwarf of Erebor; suspicious of elves at first.",
    target_profile="An elf of Mirkwood; becomes Gimli's closest friend.",
)


def judge(llm: Any = None, **kwargs: Any) -> RelationJudge:
    return RelationJudge(llm=llm, embedder=HashEmbedder(), **kwargs)


def verdict_answer(verdict: str, duplicate_of: str | None = None):
    def script(request: LLMRequest, records: list[dict[str, Any]]) -> dict[str, Any]:
        return {"verdict": verdict, "reason": "scripted", "duplicate_of": duplicate_of}

    return script


async def test_obvious_duplicate_merges_without_llm() -> None:
    llm = ScriptedLLM([])
    verdict = await judge(llm).check(
        "companion met during the Council of Elrond",
        ["Companion met during the council of Elrond."],
        CONTEXT,
    )
    assert (verdict.decision, verdict.tier, verdict.llm_requests) == ("merge", "fuzzy_high", 0)
    assert verdict.matched_relation_id == "existing_1"
    assert llm.requests == []


async def test_clearly_different_is_kept_without_llm_when_a_keep_band_is_set() -> None:
    # Seed 000's example (score 15), with the default multilingual embedder. The shipped
    # keep band is off (no held-out-safe value: cross-language duplicates score as low).
    config = DeduplicateRelationsConfig(auto_keep_cosine=0.3)
    the_judge = RelationJudge(llm=ScriptedLLM([]), config=config)
    verdict = await the_judge.check("messagère", ["Tisserand of the Vermeil Order"])
    assert (verdict.decision, verdict.tier, verdict.llm_requests) == ("keep_both", "fuzzy_low", 0)


async def test_in_between_asks_the_llm_with_all_existing_relations_and_profiles() -> None:
    llm = ScriptedLLM(verdict_answer("merge", "existing_2"))
    verdict = await judge(llm).check(
        "ally forged through shared battle",
        ["sworn rival at the start of the journey", "companion met during the Council of Elrond"],
        CONTEXT,
    )
    assert (verdict.decision, verdict.tier) == ("merge", "llm")
    assert verdict.matched_relation_id == "existing_2" and verdict.llm_requests == 1
    prompt = llm.requests[0].messages[1].content
    assert "suspicious of elves" in prompt and "closest friend" in prompt
    assert "sworn rival" in prompt and "Council of Elrond" in prompt  # all existing relations


async def test_a_guard_sends_a_similar_pair_to_the_llm() -> None:
    llm = ScriptedLLM(verdict_answer("keep_both"))
    verdict = await judge(llm).check("ally of Corvin in Book One", ["enemy of Corvin in Book One"])
    assert (verdict.decision, verdict.tier, verdict.llm_requests) == ("keep_both", "llm", 1)


async def test_unsure_goes_to_the_callback_and_the_answer_is_remembered(tmp_path: Path) -> None:
    asked: list[dict[str, Any]] = []

    async def person(question: dict[str, Any]) -> str:
        asked.append(question)
        return "merge"

    memory = AnswerMemory(tmp_path / "memory.jsonl")
    llm = ScriptedLLM(verdict_answer("unsure"))
    the_judge = judge(llm, clarifier=CallbackClarifier(person, timeout=5), memory=memory)
    args = ("ally forged through shared battle", ["companion met during the Council"], CONTEXT)
    first = await the_judge.check(*args)
    assert (first.decision, first.tier) == ("merge", "human")
    assert asked[0]["context"]["entities"][0]["profile"] == CONTEXT.source_profile
    second = await the_judge.check(*args)
    assert (second.decision, second.tier, second.llm_requests) == ("merge", "remembered", 0)
    assert len(asked) == 1 and len(llm.requests) == 1
    # Remembered across processes: a new judge over the same memory file asks nobody.
    again = await judge(ScriptedLLM([]), memory=AnswerMemory(tmp_path / "memory.jsonl")).check(
        *args
    )
    assert again.tier == "remembered"


async def test_callback_timeout_lets_the_policy_answer_and_keeps_the_question(
    tmp_path: Path,
) -> None:
    async def slow(question: dict[str, Any]) -> str:
        await asyncio.sleep(10)
        return "merge"

    queue = ReviewQueue(tmp_path)
    clarifier = CallbackClarifier(slow, timeout=0.05, queue=queue)
    verdict = await judge(ScriptedLLM(verdict_answer("unsure")), clarifier=clarifier).check(
        "ally forged through shared battle", ["companion met during the Council"], CONTEXT
    )
    assert (verdict.decision, verdict.tier) == ("keep_both", "policy")
    assert [q["id"] for q in ReviewQueue(tmp_path).pending()] == [verdict.question_id]


async def test_no_llm_in_between_goes_to_the_review_queue(tmp_path: Path) -> None:
    queue = ReviewQueue(tmp_path)
    verdict = await judge(None, clarifier=QueueClarifier(queue)).check(
        "ally forged through shared battle", ["companion met during the Council"], CONTEXT
    )
    assert verdict.tier == "policy" and verdict.question_id is not None
    queue.answer(verdict.question_id, "merge")
    memory = ReviewQueue(tmp_path).memory()
    answered = await judge(None, memory=memory).check(
        "ally forged through shared battle", ["companion met during the Council"], CONTEXT
    )
    assert (answered.decision, answered.tier) == ("merge", "remembered")


async def test_the_llm_cannot_merge_a_reversed_directed_relation() -> None:
    from relmerge.model import ExtractedRelation
    from tests.factories import record

    llm = ScriptedLLM(verdict_answer("merge", "r_old"))
    old = ExtractedRelation.model_validate(
        record(
            "r_old",
            name="acquired",
            description="Quill bought Norrbeck.",
            source_entity_id="e_ada",
            target_entity_id="e_norrbeck",
        )
    )
    new = ExtractedRelation.model_validate(record("r_new", name="acquired", description="x y"))
    verdict = await judge(llm).check(new, [old])
    assert verdict.decision == "keep_both" and verdict.tier == "direction"
    assert llm.requests == []  # a hard keep needs no LLM at all


async def test_batch_form_asks_one_request_per_pair_of_entities() -> None:
    def cluster(request: LLMRequest, records: list[dict[str, Any]]) -> dict[str, Any]:
        assert request.task == "relation_cluster"
        return {"mapping_table": {"existing_1": ["existing_1", "candidate_2"]}}

    llm = ScriptedLLM(cluster)
    existing = ["companion met during the Council of Elrond"]
    checks = [
        ("sworn rival at the start of the journey", existing, CONTEXT),
        ("ally forged through shared battle", existing, CONTEXT),
        ("fellow member of the Fellowship", existing, CONTEXT),
        ("companion met during the Council of Elrond.", existing, CONTEXT),  # rules decide
    ]
    verdicts = await judge(llm).check_many(checks)
    assert len(llm.requests) == 1
    assert [(v.decision, v.tier) for v in verdicts] == [
        ("keep_both", "llm"),
        ("merge", "llm"),
        ("keep_both", "llm"),
        ("merge", "fuzzy_high"),
    ]
    assert verdicts[1].matched_relation_id == "existing_1"
    assert [v.llm_requests for v in verdicts] == [1, 1, 1, 0]


async def test_batch_form_asks_identical_questions_once() -> None:
    llm = ScriptedLLM(verdict_answer("keep_both"))
    checks = [("ally forged in battle", ["companion met at the Council"], CONTEXT)] * 3
    verdicts = await judge(llm).check_many(checks)
    assert [v.decision for v in verdicts] == ["keep_both"] * 3
    assert len(llm.requests) == 1


async def test_terminal_clarifier_reads_the_answer(monkeypatch: Any) -> None:
    import io

    from relmerge.review.clarifiers import TerminalClarifier

    monkeypatch.setattr("sys.stdin", io.StringIO("k\n"))
    the_judge = judge(ScriptedLLM(verdict_answer("unsure")), clarifier=TerminalClarifier())
    verdict = await the_judge.check(
        "ally forged through shared battle", ["companion met during the Council"], CONTEXT
    )
    assert (verdict.decision, verdict.tier) == ("keep_both", "human")
