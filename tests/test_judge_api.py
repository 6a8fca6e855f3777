"""The incremental judge: each tier, the LLM with context, people, remembered answers."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest

from relmerge import DeduplicateRelationsConfig, JudgeContext, RelationJudge
from relmerge.errors import ProviderError
from relmerge.providers.base import LLMRequest
from relmerge.providers.breaker import CircuitBreakerModel
from relmerge.providers.embedding import HashEmbedder
from relmerge.providers.fake import ScriptedLLM
from relmerge.providers.limits import BudgetModel
from relmerge.providers.openai_compat import OpenAICompatibleModel
from relmerge.providers.openai_embed import OpenAIEmbedder
from relmerge.review.clarifiers import CallbackClarifier, QueueClarifier
from relmerge.review.memory import AnswerMemory
from relmerge.review.queue import ReviewQueue
from tests.support.llm_server import PREFLIGHT_OK, LLMServer, Reply, json_reply

CONTEXT = JudgeContext(
    source_name="Gimli",
    target_name="Legolas",
    source_profile="A dwarf of Erebor; suspicious of elves at first.",
    target_profile="An elf of Mirkwood; becomes Gimli's closest friend.",
)


def judge(llm: Any = None, **kwargs: Any) -> RelationJudge:
    return RelationJudge(llm=llm, embedder=HashEmbedder(), **kwargs)


def verdict_body(verdict: str, duplicate_of: str | None = None) -> dict[str, Any]:
    return {"verdict": verdict, "reason": "scripted", "duplicate_of": duplicate_of}


def verdict_answer(verdict: str, duplicate_of: str | None = None):
    def script(request: LLMRequest, records: list[dict[str, Any]]) -> dict[str, Any]:
        return verdict_body(verdict, duplicate_of)

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


# The LLM endpoint: checked before the first question, and its failures said honestly --------

KEY = "sk-judge-0123456789abcdef"
IN_BETWEEN = ("ally forged through shared battle", ["companion met during the Council"], CONTEXT)


def free_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def endpoint(url: str, **options: Any) -> OpenAICompatibleModel:
    """The model an app builds: no retries beyond the first request, and short waits."""
    settings: dict[str, Any] = {"max_retries": 0, "backoff_seconds": 0.0, "startup_wait": 0.5}
    return OpenAICompatibleModel(base_url=url, model="m", api_key=KEY, **(settings | options))


async def checked_then_gone(wrap: Any = None, **kwargs: Any) -> tuple[RelationJudge, str]:
    """A judge whose endpoint passed its preflight, then stopped: nothing listens now."""
    with LLMServer(handler=lambda body: json_reply(verdict_body("keep_both"))) as server:
        url = server.base_url
        model = endpoint(url)
        the_judge = judge(wrap(model) if wrap else model, **kwargs)
        assert await the_judge.preflight() == 1
    return the_judge, url


async def test_an_endpoint_where_nothing_listens_raises_before_any_question() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    the_judge = judge(endpoint(url))
    with pytest.raises(ProviderError) as raised:
        await the_judge.check(*IN_BETWEEN)
    message = str(raised.value)
    assert message.startswith(f"LLM endpoint {url}: connection refused")
    assert "is the server running" in message and KEY not in message
    assert len(message.splitlines()) == 1
    assert the_judge.llm.stats.requests == 0  # no question was sent
    assert the_judge.preflight_requests >= 1


async def test_the_endpoint_is_checked_once_before_the_first_question_only() -> None:
    with LLMServer(handler=lambda body: json_reply(verdict_body("keep_both"))) as server:
        the_judge = judge(endpoint(server.base_url))
        obvious = await the_judge.check("ally in the quest", ["Ally in the quest."], CONTEXT)
        assert obvious.tier == "fuzzy_high" and server.requests == []  # lazily: not yet
        first = await the_judge.check(*IN_BETWEEN)
        second = await the_judge.check("sworn rival of old", ["companion met at the Council"])
        asked = len(server.group_requests)
        checked = server.preflight_count
    assert checked == 1 == the_judge.preflight_requests
    assert asked == 2 and first.llm_requests == second.llm_requests == 1
    assert (first.tier, first.llm_outcome, first.llm_error) == ("llm", "answered", None)


async def test_an_endpoint_that_dies_is_unavailable_not_unsure(tmp_path: Path) -> None:
    the_judge, url = await checked_then_gone(clarifier=QueueClarifier(ReviewQueue(tmp_path)))
    verdict = await the_judge.check(*IN_BETWEEN)  # connection refused
    assert (verdict.decision, verdict.tier, verdict.llm_outcome) == (
        "keep_both",
        "policy",
        "unavailable",
    )
    assert verdict.reason.startswith("LLM unavailable: the model endpoint failed: ")
    assert verdict.reason.endswith("; no answer, the policy decided")
    assert "unsure" not in verdict.reason
    assert verdict.llm_error is not None and url in verdict.llm_error
    assert verdict.llm_requests == 3  # max_attempts, each a single request
    [question] = ReviewQueue(tmp_path).pending()
    assert question["id"] == verdict.question_id
    assert question["reason"].startswith("LLM unavailable: ")


async def test_a_person_answering_for_an_unavailable_llm_is_told_why() -> None:
    asked: list[dict[str, Any]] = []

    async def person(question: dict[str, Any]) -> str:
        asked.append(question)
        return "merge"

    the_judge, _ = await checked_then_gone(clarifier=CallbackClarifier(person, timeout=5))
    verdict = await the_judge.check(*IN_BETWEEN)
    assert (verdict.decision, verdict.tier, verdict.llm_outcome) == (
        "merge",
        "human",
        "unavailable",
    )
    assert verdict.reason.startswith("a person answered (LLM unavailable: ")
    assert asked[0]["reason"].startswith("LLM unavailable: ")


async def test_a_spent_budget_and_an_open_breaker_are_said_so() -> None:
    spent = judge(BudgetModel(ScriptedLLM([]), max_requests=0, max_tokens=None))
    verdict = await spent.check(*IN_BETWEEN)
    assert (verdict.tier, verdict.llm_outcome, verdict.llm_requests) == (
        "policy",
        "budget_spent",
        0,
    )
    assert verdict.reason.startswith("LLM unavailable: the LLM request budget is spent (0 ")

    the_judge, _ = await checked_then_gone(lambda model: CircuitBreakerModel(model, 1))
    first = await the_judge.check(*IN_BETWEEN)
    second = await the_judge.check("sworn rival of old", ["companion met at the Council"])
    assert first.llm_outcome == second.llm_outcome == "unavailable"
    assert first.llm_requests == 3 and second.llm_requests == 0  # the breaker sent nothing
    assert "stopped answering" in second.reason and second.reason.startswith("LLM unavailable")


async def test_answers_that_are_never_valid_are_not_an_unsure_llm() -> None:
    verdict = await judge(ScriptedLLM(lambda request, records: "not json")).check(*IN_BETWEEN)
    assert (verdict.tier, verdict.llm_outcome) == ("policy", "invalid")
    assert verdict.reason.startswith("no valid LLM answer: LLM output is not valid JSON.")


async def test_unsure_and_no_llm_say_what_happened() -> None:
    unsure = await judge(ScriptedLLM(verdict_answer("unsure"))).check(*IN_BETWEEN)
    assert (unsure.llm_outcome, unsure.llm_error) == ("unsure", None)
    assert unsure.reason == "the LLM was unsure; no answer, the policy decided"
    rules_only = await judge(None).check(*IN_BETWEEN)
    assert rules_only.llm_outcome == "not_configured" and "LLM" not in rules_only.reason


async def test_the_batch_form_does_not_ask_a_dead_endpoint_again_per_check() -> None:
    the_judge, _ = await checked_then_gone()
    existing = ["companion met during the Council of Elrond"]
    checks = [
        ("sworn rival at the start of the journey", existing, CONTEXT),
        ("ally forged through shared battle", existing, CONTEXT),
        ("fellow member of the Fellowship", existing, CONTEXT),
    ]
    verdicts = await the_judge.check_many(checks)
    assert the_judge.llm.stats.requests == 3  # one cluster question, no pairwise fallbacks
    assert {(v.tier, v.llm_outcome) for v in verdicts} == {("policy", "unavailable")}
    assert all(v.reason.startswith("LLM unavailable: ") for v in verdicts)


async def test_the_batch_form_raises_for_an_endpoint_where_nothing_listens() -> None:
    the_judge = judge(endpoint(f"http://127.0.0.1:{free_port()}/v1"))
    existing = ["companion met during the Council of Elrond"]
    checks = [(text, existing, CONTEXT) for text in ("ally in battle", "rival of old")]
    with pytest.raises(ProviderError, match="connection refused"):
        await the_judge.check_many(checks)
    assert the_judge.llm.stats.requests == 0


async def test_a_failed_preflight_is_made_again_before_the_next_question() -> None:
    with LLMServer(
        handler=lambda body: json_reply(verdict_body("keep_both")), preflight=None
    ) as server:
        server.enqueue(Reply(status=404), PREFLIGHT_OK)  # a wrong route, then fixed
        the_judge = judge(endpoint(server.base_url))
        with pytest.raises(ProviderError, match="HTTP 404"):
            await the_judge.check(*IN_BETWEEN)
        verdict = await the_judge.check(*IN_BETWEEN)
        await the_judge.check("sworn rival of old", ["companion met at the Council"])
        checks = server.preflight_count
    assert (verdict.tier, verdict.llm_outcome) == ("llm", "answered")
    assert checks == 2 == the_judge.preflight_requests


async def test_an_embeddings_endpoint_where_nothing_listens_raises_too() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    embedder = OpenAIEmbedder(base_url=url, model="e", api_key=KEY, startup_wait=0.0)
    the_judge = RelationJudge(llm=ScriptedLLM([]), embedder=embedder)
    with pytest.raises(ProviderError) as raised:
        await the_judge.check(*IN_BETWEEN)
    assert str(raised.value).startswith(f"embeddings endpoint {url}: connection refused")
    assert KEY not in str(raised.value)
