"""Packed requests (``decide.pack``, task ``relation_cluster_many``): several blocks' first
questions in one request, each block answered among its own records only."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from relmerge.errors import InvalidAnswerError
from relmerge.model import EntityContext
from relmerge.prompts import cluster_many
from relmerge.providers.base import LLMRequest
from relmerge.providers.embedding import HashEmbedder
from relmerge.providers.fake import ScriptedLLM
from tests.factories import record, run_step, step_log
from tests.support.near_miss import states_near_miss

LLM_ONLY: dict[str, Any] = {
    "auto_merge_cosine": None,
    "auto_keep_cosine": -1.0,
    "canaries": 0,
    "llm_pack_tokens": 0,
}
PACKED: dict[str, Any] = {**LLM_ONLY, "llm_pack_tokens": 8000}


def block_records(block: int, size: int) -> list[dict[str, Any]]:
    """``size`` relations between one pair of entities of its own (block ``block``)."""
    return [
        record(
            f"k{block}_{i}",
            source_entity_id=f"e_src{block}",
            target_entity_id=f"e_dst{block}",
            source_entity_name=f"Source {block}",
            target_entity_name=f"Target {block}",
            name=["leads", "heads", "runs"][i % 3],
            description=f"Source {block} {['leads', 'heads', 'runs'][i % 3]} Target {block}.",
        )
        for i in range(size)
    ]


RECORDS = block_records(1, 3) + block_records(2, 2) + block_records(3, 3)


def merge_each_block(request: LLMRequest, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Every block's records state one fact; per question as per pack."""
    if request.task == "relation_cluster_many":
        return {"blocks": [{"block": b["block"], **merge_all(b["records"])} for b in records]}
    if request.task == "relation_judge":
        existing = next(r for r in records if r["role"] == "existing")
        return {"verdict": "merge", "reason": "same", "duplicate_of": existing["relation_id"]}
    return merge_all(records)


def merge_all(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The records' one fact as one group (a near-miss canary states another)."""
    ids = [r["relation_id"] for r in records if not states_near_miss(r)]
    return {"mapping_table": {ids[0]: ids}}


def model(script: Any) -> ScriptedLLM:
    """A scripted model whose script answers packed requests itself."""
    return ScriptedLLM(script, per_block=False)


def groups(mapping: dict[str, str]) -> set[frozenset[str]]:
    by: dict[str, set[str]] = {}
    for relation_id, merged in mapping.items():
        by.setdefault(merged, set()).add(relation_id)
    return {frozenset(g) for g in by.values()}


EACH_BLOCK = {
    frozenset(r["relation_id"] for r in RECORDS if r["relation_id"][1] == b) for b in "123"
}


async def test_one_packed_request_merges_within_each_block() -> None:
    llm = model(merge_each_block)
    output, _, store = await run_step(RECORDS, llm, embedder=HashEmbedder(), **PACKED)
    assert [r.task for r in llm.requests] == ["relation_cluster_many"]
    assert groups(output.relation_id_mapping) == EACH_BLOCK
    sent = orjson.loads(llm.requests[0].messages[1].content.split("```json\n")[1].split("\n```")[0])
    assert [b["block"] for b in sent] == ["b1", "b2", "b3"]  # block order
    assert [b["entities"]["A"]["name"] for b in sent] == ["Source 1", "Source 2", "Source 3"]
    decisions = [orjson.loads(x) for x in step_log(store, "decisions.jsonl").splitlines()]
    assert any(d.get("prompt") == cluster_many.PROMPT for d in decisions)


async def test_packing_off_asks_each_question_alone() -> None:
    llm = model(merge_each_block)
    output, _, _ = await run_step(RECORDS, llm, embedder=HashEmbedder(), **LLM_ONLY)
    assert sorted(r.task for r in llm.requests) == [
        "relation_cluster",
        "relation_cluster",
        "relation_judge",
    ]
    assert groups(output.relation_id_mapping) == EACH_BLOCK


async def test_packed_and_per_question_write_the_same_relations() -> None:
    alone, _, _ = await run_step(
        RECORDS, model(merge_each_block), embedder=HashEmbedder(), **LLM_ONLY
    )
    packed, _, _ = await run_step(
        RECORDS, model(merge_each_block), embedder=HashEmbedder(), **PACKED
    )
    assert alone.relation_id_mapping == packed.relation_id_mapping
    assert [r.model_dump() for r in alone.relations] == [r.model_dump() for r in packed.relations]


async def test_a_tiny_budget_packs_nothing() -> None:
    llm = model(merge_each_block)
    await run_step(RECORDS, llm, embedder=HashEmbedder(), **{**LLM_ONLY, "llm_pack_tokens": 1})
    assert "relation_cluster_many" not in {r.task for r in llm.requests}
    assert len(llm.requests) == 3


def cross_block(request: LLMRequest, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Packed: block b1 also maps a record of block b2 (never allowed); alone: merge."""
    answer = merge_each_block(request, records)
    if request.task == "relation_cluster_many":
        first, second = answer["blocks"][0], answer["blocks"][1]
        key = next(iter(first["mapping_table"]))
        first["mapping_table"][key].append(next(iter(second["mapping_table"])))
    return answer


async def test_a_merge_across_blocks_is_refused_and_both_blocks_asked_alone() -> None:
    llm = model(cross_block)
    output, _, _ = await run_step(RECORDS, llm, embedder=HashEmbedder(), **PACKED)
    tasks = [r.task for r in llm.requests]
    assert tasks[0] == "relation_cluster_many"
    assert sorted(tasks[1:]) == ["relation_cluster", "relation_judge"]  # blocks 1 and 2
    alone = [
        {
            r["relation_id"]
            for r in orjson.loads(
                request.messages[1].content.split("```json\n")[1].split("\n```")[0]
            )
        }
        for request in llm.requests[1:]
    ]
    assert sorted(alone, key=min) == [{"k1_0", "k1_1", "k1_2"}, {"k2_0", "k2_1"}]
    assert groups(output.relation_id_mapping) == EACH_BLOCK  # nothing across, nothing lost


def second_block_broken(request: LLMRequest, records: list[dict[str, Any]]) -> dict[str, Any]:
    answer = merge_each_block(request, records)
    if request.task == "relation_cluster_many":
        answer["blocks"][1]["mapping_table"] = {"nope": ["k9_9"]}
    return answer


async def test_a_partly_invalid_answer_keeps_the_valid_parts() -> None:
    llm = model(second_block_broken)
    output, _, _ = await run_step(RECORDS, llm, embedder=HashEmbedder(), **PACKED)
    # Block 2 (two records) is asked again alone, as its pairwise question; 1 and 3 not.
    assert [r.task for r in llm.requests] == ["relation_cluster_many", "relation_judge"]
    assert groups(output.relation_id_mapping) == EACH_BLOCK


async def test_an_answer_with_no_valid_part_is_retried_then_each_block_asks_alone() -> None:
    def broken(request: LLMRequest, records: list[dict[str, Any]]) -> dict[str, Any]:
        if request.task == "relation_cluster_many":
            return {"mapping_table": {}}  # not a list of blocks
        return merge_each_block(request, records)

    llm = model(broken)
    output, _, _ = await run_step(RECORDS, llm, embedder=HashEmbedder(), **PACKED)
    tasks = [r.task for r in llm.requests]
    assert tasks[:2] == ["relation_cluster_many", "relation_cluster_many"]
    assert "answer is invalid" in llm.requests[1].messages[-1].content  # the retry says why
    assert sorted(tasks[2:]) == ["relation_cluster", "relation_cluster", "relation_judge"]
    assert groups(output.relation_id_mapping) == EACH_BLOCK


async def test_packing_is_the_same_run_to_run() -> None:
    first, second = model(merge_each_block), model(merge_each_block)
    await run_step(RECORDS, first, embedder=HashEmbedder(), **PACKED)
    await run_step(RECORDS, second, embedder=HashEmbedder(), **PACKED)
    assert [r.messages for r in first.requests] == [r.messages for r in second.requests]


def parts(count: int = 2) -> list[cluster_many.Part]:
    """``count`` blocks of two records each."""
    entities = (EntityContext("e1", "A"), EntityContext("e2", "B"))
    return [
        cluster_many.Part([record(f"{letter}1"), record(f"{letter}2")], entities, {})
        for letter in "rstuvw"[:count]
    ]


def test_validate_reads_each_block_among_its_own_records() -> None:
    # The pack names its records r1, r2 (block b1), r3, r4 (b2) and r5, r6 (b3).
    answer = {
        "blocks": [
            {"block": "b1", "mapping_table": {"r1": ["r1", "r2"]}},
            {"block": "b2", "mapping_table": {"r3": ["r4", "r1"]}},  # r1 is block b1's
            {"block": "b3", "mapping_table": {"r5": ["r6"]}},
        ]
    }
    first, second, third = cluster_many.validate_answer(answer, parts(3))
    # A group across blocks: neither block's part is read; the third block's is.
    assert isinstance(first, InvalidAnswerError) and "groups records of b1 and b2" in str(first)
    assert isinstance(second, InvalidAnswerError) and "b2" in str(second)
    assert not isinstance(third, InvalidAnswerError) and third.groups == [[0, 1]]


def test_a_group_listed_under_another_blocks_entry_is_its_own_blocks() -> None:
    """Record names are unique across the pack: a small model that writes every group
    under its first entry still answers each block, each among its own records."""
    answer = {
        "blocks": [
            {
                "block": "b1",
                "mapping_table": {"r1": ["r2"], "r5": ["r6"]},
                "unsure": [["r3", "r4"]],
                "relation_list": [
                    {
                        "relation_id": "r5",
                        "Node1": "Norrbeck Systems",
                        "Node2": "Ada Lind",
                        "Relation": "works for",
                        "Type": "employment",
                        "Description": "Ada works for Norrbeck.",
                    }
                ],
            }
        ]
    }
    first, second, third, fourth = cluster_many.validate_answer(answer, parts(4))
    assert not isinstance(first, InvalidAnswerError) and first.groups == [[0, 1]]
    assert not isinstance(second, InvalidAnswerError)
    assert second.groups == [] and second.unsure == [[0, 1]]
    assert not isinstance(third, InvalidAnswerError) and third.groups == [[0, 1]]
    assert third.fields[0]["description"] == "Ada works for Norrbeck."
    assert not first.fields  # the entry's fields went with its group
    # A block that no entry answers and no group names is unanswered, not "nothing merges".
    assert isinstance(fourth, InvalidAnswerError) and "no entry for block b4" in str(fourth)


def sent_blocks(request: LLMRequest) -> list[dict[str, Any]]:
    user = request.messages[1].content
    blocks: list[dict[str, Any]] = orjson.loads(user.split("```json\n")[1].split("\n```")[0])
    return blocks


def test_a_pack_names_its_records_r1_to_rn_and_shows_no_relation_id() -> None:
    """Short names a small model copies without typos: numbered across the request, no
    relation id and no ``merged_from`` list anywhere in what is sent."""
    entities = (EntityContext("e1", "A"), EntityContext("e2", "B"))

    def shown(relation_id: str) -> dict[str, Any]:  # a record as a block's question shows it
        return {"relation_id": relation_id, "name": "leads", "description": "A leads B."}

    merged = {**shown("rel_3b1e81deb7e6"), "merged_from": ["rel_3b1e81deb7e6", "rel_9f"]}
    first = cluster_many.Part([merged, shown("rel_0c2d11aa47b0")], entities, {})
    second = cluster_many.Part([shown("rel_77e0c9d2a1f4")] * 2, entities, {})
    request = cluster_many.build_request([first, second], temperature=0.0)
    blocks = sent_blocks(request)
    names = [[r["relation_id"] for r in block["records"]] for block in blocks]
    assert names == [["r1", "r2"], ["r3", "r4"]]
    assert all("merged_from" not in r for block in blocks for r in block["records"])
    user = request.messages[1].content
    assert "rel_" not in user
    assert blocks[0]["records"][0]["description"] == merged["description"]  # only the name


def test_an_answer_naming_a_relation_id_is_that_block_invalid() -> None:
    """The answer is read by the names the request gave: a relation id the request never
    showed names nothing, even the record it belongs to."""
    entities = (EntityContext("e1", "A"), EntityContext("e2", "B"))
    one = cluster_many.Part([record("rel_a"), record("rel_b")], entities, {})
    two = cluster_many.Part([record("rel_c"), record("rel_d")], entities, {})
    answer = {
        "blocks": [
            {"block": "b1", "mapping_table": {"rel_a": ["rel_a", "rel_b"]}},
            {"block": "b2", "mapping_table": {"r3": ["r3", "r4"]}},
        ]
    }
    first, second = cluster_many.validate_answer(answer, [one, two])
    assert isinstance(first, InvalidAnswerError) and "'rel_a'" in str(first)
    assert not isinstance(second, InvalidAnswerError) and second.groups == [[0, 1]]


def test_an_entity_is_described_once_per_pack() -> None:
    """A hub entity in several blocks of a pack shows its profile in the first only; an
    entity of the same name with another profile is shown in full."""
    hub = EntityContext("e1", "Norrbeck", "Invented software company, Austin.", "organization")
    other = EntityContext("e2", "Petrel", "Computer-vision company.", "organization")
    homonym = EntityContext("e9", "Norrbeck", "A river in Sweden.", "place")
    parts_ = [
        cluster_many.Part([record("a")], (hub, other), {}),
        cluster_many.Part([record("b")], (hub, EntityContext("e3", "Lumen")), {}),
        cluster_many.Part([record("c")], (homonym, other), {}),
    ]
    blocks = sent_blocks(cluster_many.build_request(parts_, temperature=0.0))
    assert blocks[0]["entities"]["A"]["profile"] == hub.profile
    assert blocks[1]["entities"]["A"] == {
        "name": "Norrbeck",
        "type": "organization",
        "profile": "(as in block b1)",
    }
    assert blocks[1]["entities"]["B"] == {"name": "Lumen"}
    assert blocks[2]["entities"]["A"]["profile"] == homonym.profile
    assert blocks[2]["entities"]["B"]["profile"] == "(as in block b1)"
    user = cluster_many.build_request(parts_, temperature=0.0).messages[1].content
    assert hub.profile is not None and user.count(hub.profile) == 1


@pytest.mark.parametrize(
    "answer",
    [
        {"mapping_table": {}},
        {"blocks": [{"block": "b7", "mapping_table": {}}]},
        {"blocks": [{"block": "b1", "mapping_table": {"x": ["y"]}}]},  # b2 missing too
    ],
)
def test_validate_refuses_an_answer_with_no_valid_part(answer: dict[str, Any]) -> None:
    with pytest.raises(InvalidAnswerError):
        cluster_many.validate_answer(answer, parts())


def test_a_missing_block_is_that_block_invalid() -> None:
    answer = {"blocks": [{"block": "b1", "mapping_table": {}}]}
    first, second = cluster_many.validate_answer(answer, parts())
    assert not isinstance(first, InvalidAnswerError) and first.groups == []
    assert isinstance(second, InvalidAnswerError) and "no entry for block b2" in str(second)


def _sent(request: LLMRequest) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = orjson.loads(
        request.messages[1].content.split("```json\n")[1].split("\n```")[0]
    )
    return blocks


def _prompt_chars(request: LLMRequest) -> int:
    return sum(len(message.content) for message in request.messages)


@pytest.mark.parametrize("share", [0.1, 0.3, 1.0])
async def test_a_packs_canaries_ride_per_request_within_their_share_of_tokens(
    share: float,
) -> None:
    """Canaries per request, not per block: the pack's added records (made-up or copied)
    cost at most ``canary_tokens`` of the prompt without them; a model that groups them
    right is counted right, and the output is the one without canaries."""
    bigger = block_records(1, 6) + block_records(2, 5) + block_records(3, 6) + block_records(4, 5)
    plain = model(merge_each_block)
    off, _, _ = await run_step(bigger, plain, embedder=HashEmbedder(), **PACKED)
    llm = model(merge_each_block)
    config = {**PACKED, "canaries": 0.05, "canary_tokens": share}
    output, _, _ = await run_step(bigger, llm, embedder=HashEmbedder(), **config)
    assert [r.task for r in llm.requests] == [r.task for r in plain.requests]
    assert [r.task for r in llm.requests] == ["relation_cluster_many"]
    (with_canaries,), (without,) = llm.requests, plain.requests
    added = _prompt_chars(with_canaries) - _prompt_chars(without)
    assert 0 <= added <= share * _prompt_chars(without)
    real = {r["relation_id"] for r in bigger}
    hosts = [
        b
        for b in _sent(with_canaries)
        if len(b["records"])
        > sum(r["relation_id"].startswith(f"k{b['block'][1]}_") for r in bigger)
    ]
    canaries = output.result["canaries"]
    assert canaries["in_requests"] == canaries["asked"] == canaries["right"] > 0
    if share < 1.0:
        assert len(hosts) < 4  # not every block carries canaries
    assert output.relation_id_mapping == off.relation_id_mapping
    assert real <= set(output.relation_id_mapping)


async def test_a_pack_that_cannot_afford_a_canary_carries_none() -> None:
    """A share too small for one added record adds none (and counts none)."""
    llm = model(merge_each_block)
    config = {**PACKED, "canaries": 0.05, "canary_tokens": 0.001}
    output, _, _ = await run_step(RECORDS, llm, embedder=HashEmbedder(), **config)
    sent = _sent(llm.requests[0])
    assert [len(b["records"]) for b in sent] == [3, 2, 3]
    assert output.result["canaries"]["asked"] == 0
    assert output.result["canaries"]["verdict"] == "not_judged"


@pytest.mark.parametrize(("size", "packed"), [(3, []), (4, [4]), (6, [6])])
async def test_a_request_never_holds_more_records_than_semantic_batch_size(
    size: int, packed: list[int]
) -> None:
    """The seed's semantic batch is what the model sees at once: no request, packed or
    not, holds more than ``semantic_batch_size`` records of the batch (canary records
    beside them); three blocks of two records pack as the size allows."""
    three = block_records(1, 2) + block_records(2, 2) + block_records(3, 2)
    llm = model(merge_each_block)
    config = {**PACKED, "semantic_batch_size": size}
    output, _, _ = await run_step(three, llm, embedder=HashEmbedder(), **config)
    real = {r["relation_id"] for r in three}
    sizes = [
        sum(len(block["records"]) for block in _sent(request))
        for request in llm.requests
        if request.task == "relation_cluster_many"
    ]
    assert sizes == packed
    assert all(size >= n for n in sizes)
    assert real <= set(output.relation_id_mapping)


async def test_a_script_of_the_one_question_tasks_answers_a_pack_block_by_block() -> None:
    """The scripted model puts each block of a pack to a script that knows only
    ``relation_cluster`` and ``relation_judge``, as the block's own question."""
    asked: list[tuple[str, int]] = []

    def one_question(request: LLMRequest, records: list[dict[str, Any]]) -> dict[str, Any]:
        assert request.task != "relation_cluster_many"
        asked.append((request.task, len(records)))
        return merge_each_block(request, records)

    llm = ScriptedLLM(one_question)
    output, _, _ = await run_step(RECORDS, llm, embedder=HashEmbedder(), **PACKED)
    assert [r.task for r in llm.requests] == ["relation_cluster_many"]
    assert asked == [("relation_cluster", 3), ("relation_judge", 2), ("relation_cluster", 3)]
    assert groups(output.relation_id_mapping) == EACH_BLOCK


@pytest.mark.parametrize("first", ["r2", None])
def test_a_mapping_entry_that_is_no_list_is_an_invalid_part_not_a_crash(first: Any) -> None:
    """The same key under two entries, once not a list: that block's part is invalid (a
    TypeError would fail every block of the pack)."""
    answer = {
        "blocks": [
            {"block": "b1", "mapping_table": {"r1": first}},
            {"block": "b2", "mapping_table": {"r1": ["r2"]}},  # b1's records, listed by b2
            {"block": "b3", "mapping_table": {"r5": ["r6"]}},
        ]
    }
    one, two, three = cluster_many.validate_answer(answer, parts(3))
    assert isinstance(one, InvalidAnswerError) and "must be a list" in str(one)
    assert not isinstance(two, InvalidAnswerError) and two.groups == []
    assert not isinstance(three, InvalidAnswerError) and three.groups == [[0, 1]]


def test_one_records_fields_or_a_group_of_one_do_not_answer_a_block() -> None:
    """Block b2 has no entry; b1's entry names one b2 record alone: b2 is unanswered, not
    "nothing merges"."""
    fields = {
        "relation_id": "r4",
        "Node1": "Norrbeck Systems",
        "Node2": "Ada Lind",
        "Relation": "works for",
        "Type": "employment",
        "Description": "Ada works for Norrbeck.",
    }
    answer = {
        "blocks": [
            {
                "block": "b1",
                "mapping_table": {"r1": ["r2"], "r3": ["r3"]},
                "unsure": [["r4"]],
                "relation_list": [fields],
            }
        ]
    }
    one, two = cluster_many.validate_answer(answer, parts(2))
    assert not isinstance(one, InvalidAnswerError) and one.groups == [[0, 1]]
    assert isinstance(two, InvalidAnswerError) and "no entry for block b2" in str(two)
