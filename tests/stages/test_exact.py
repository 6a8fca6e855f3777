"""The exact stage through the real step, with scripted in-process models."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from relmerge.errors import InputError, ProviderError
from relmerge.ids import dedup_chunk_id, merged_relation_id
from relmerge.model import ExtractedRelation
from relmerge.providers.base import LLMRequest
from relmerge.providers.fake import ScriptedLLM, merge_all, request_records
from tests.factories import merge_answer, record, run_step, step_log


def _ids(request: LLMRequest) -> list[str]:
    return [item["relation_id"] for item in request_records(request)]


async def test_group_with_different_descriptions_is_merged_by_the_llm() -> None:
    records = [
        record("r1", description="Ada Lind has been CEO since 2017.", source_chunk_ids=["c1"]),
        record("r2", description="Ada Lind leads Norrbeck as its CEO.", source_chunk_ids=["c2"]),
        record("r3", name="founded", description="Founded it."),
    ]
    llm = ScriptedLLM([merge_answer(description="Ada Lind is CEO of Norrbeck since 2017.")])
    output, context, store = await run_step(records, llm)

    merged_id = merged_relation_id(["r1", "r2"], "CEO of")
    assert output.relation_id_mapping == {"r1": merged_id, "r2": merged_id, "r3": "r3"}
    merged = ExtractedRelation.model_validate_json(
        store.objects[f"deduplicated_relations/{merged_id}.json"]
    )
    assert merged.description == "Ada Lind is CEO of Norrbeck since 2017."
    assert merged.source_chunk_ids == ["c1", "chunk_r1", "c2", "chunk_r2"]
    assert merged.chunk_id == dedup_chunk_id(merged.source_chunk_ids)
    assert merged.document_id == "doc_1"
    assert (merged.source_entity_id, merged.target_entity_id) == ("e_norrbeck", "e_ada")
    # The unmerged relation keeps its id and content.
    untouched = orjson.loads(store.objects["deduplicated_relations/r3.json"])
    assert untouched == record("r3", name="founded", description="Founded it.")
    assert context.artifacts["relation_id_mapping"] == output.relation_id_mapping
    assert sorted(context.artifacts["deduplicated_relation_keys"]) == sorted(
        [f"deduplicated_relations/{merged_id}.json", "deduplicated_relations/r3.json"]
    )
    result = context.artifacts["deduplicate_relations_result"]
    assert result["exact_merge_count"] == 1
    assert result["llm_requests"] == 1
    assert result["output_relation_count"] == 2
    assert len(llm.requests) == 1 and _ids(llm.requests[0]) == ["r1", "r2"]


async def test_large_group_is_merged_in_accumulating_batches() -> None:
    records = [record(f"r{i:02d}", description=f"Mention {i} of the role.") for i in range(25)]
    llm = ScriptedLLM(merge_all)
    output, _, _ = await run_step(records, llm, llm_batch_size=10)

    batches = [_ids(request) for request in llm.requests]
    assert [len(batch) for batch in batches] == [10, 10, 7]
    first_merge = merged_relation_id([f"r{i:02d}" for i in range(10)], "CEO of")
    second_merge = merged_relation_id([f"r{i:02d}" for i in range(19)], "CEO of")
    assert batches[1][0] == first_merge and batches[2][0] == second_merge
    assert len(set(output.relation_id_mapping.values())) == 1
    assert output.result["exact_round_count"] == 1


async def test_renamed_merge_meets_another_key_in_a_later_round() -> None:
    records = [
        record("a1", name="chief executive of", description="CEO since 2017."),
        record("a2", name="chief executive of", description="Chief executive from 2017."),
        record("b1", name="CEO of", description="Ada Lind, CEO."),
        record("b2", name="CEO of", description="Ada is the CEO."),
    ]

    def script(request: LLMRequest, items: list[dict[str, object]]) -> dict[str, object]:
        return merge_answer(name="CEO of", description="Ada Lind is CEO since 2017.")

    llm = ScriptedLLM(script)
    output, _, _ = await run_step(records, llm)
    assert len(set(output.relation_id_mapping.values())) == 1
    assert output.result["exact_round_count"] == 2
    assert len(llm.requests) == 3


async def test_split_answer_keeps_periods_apart_and_maps_every_input() -> None:
    records = [
        record("p1", description="CEO from 1998 to 2009."),
        record("p2", description="CEO since 2017."),
        record("p3", description="Returned as CEO in 2017."),
    ]
    answer = {
        "relations": [
            {
                "type": "employment",
                "name": "CEO of",
                "description": "CEO 1998-2009.",
                "attributes": {"period": "1998-2009"},
                "relation_ids": ["p1"],
            },
            {
                "type": "employment",
                "name": "CEO of",
                "description": "CEO since 2017.",
                "attributes": {"since": 2017},
                "relation_ids": ["p2", "p3"],
            },
        ]
    }
    llm = ScriptedLLM([answer])
    output, _, store = await run_step(records, llm)

    later = merged_relation_id(["p2", "p3"], "CEO of")
    assert output.relation_id_mapping == {"p1": "p1", "p2": later, "p3": later}
    # A part with a single record is that record, untouched (merging with nothing).
    assert orjson.loads(store.objects["deduplicated_relations/p1.json"])["description"] == (
        "CEO from 1998 to 2009."
    )
    merged = orjson.loads(store.objects[f"deduplicated_relations/{later}.json"])
    assert merged["attributes"] == {"since": "2017"}
    # Split parts are known distinct: no second round re-asks about them.
    assert len(llm.requests) == 1


async def test_without_llm_different_descriptions_stay_apart() -> None:
    records = [
        record("b1", name="bounty on", description="A bounty of 500 crowns."),
        record("b2", name="bounty on", description="A bounty of 5,000 crowns."),
    ]
    output, _, store = await run_step(records, None)
    assert output.relation_id_mapping == {"b1": "b1", "b2": "b2"}
    assert output.result["llm_needed_group_count"] == 1
    assert output.result["llm_requests"] == 0
    decisions = [orjson.loads(line) for line in step_log(store, "decisions.jsonl").splitlines()]
    assert decisions[0]["verdict"] == "llm_needed" and decisions[0]["member_ids"] == ["b1", "b2"]


async def test_identical_descriptions_merge_without_llm_across_width_case_and_spaces() -> None:
    records = [
        record("w1", name="CEO of", description="Ada Lind is the CEO."),
        record("w2", name=" ＣＥＯ  of ", description="ada lind is the CEO"),
        record("w3", name="ceo OF", type=" Employment ", description="Ada Lind is the ＣＥＯ."),
    ]
    output, _, store = await run_step(records, None)
    merged_id = merged_relation_id(["w1", "w2", "w3"], "CEO of")
    assert set(output.relation_id_mapping.values()) == {merged_id}
    merged = orjson.loads(store.objects[f"deduplicated_relations/{merged_id}.json"])
    assert merged["name"] == "CEO of"  # stored text keeps the representative's form
    assert output.result["exact_merge_count"] == 2


async def test_identical_descriptions_with_conflicting_attributes_are_not_auto_merged() -> None:
    records = [
        record("s1", description="Holds a stake.", attributes={"stake": "20%"}),
        record("s2", description="Holds a stake.", attributes={"stake": "35%"}),
    ]
    output, _, _ = await run_step(records, None)
    assert output.relation_id_mapping == {"s1": "s1", "s2": "s2"}


async def test_retry_tells_the_model_what_was_invalid() -> None:
    records = [record("r1"), record("r2")]
    llm = ScriptedLLM(["I think they are the same!", merge_answer()])
    output, _, _ = await run_step(records, llm)
    assert len(set(output.relation_id_mapping.values())) == 1
    retry = llm.requests[1].messages
    assert retry[-2].role == "assistant" and retry[-2].content == "I think they are the same!"
    assert "not valid JSON" in retry[-1].content
    assert output.result["llm_requests"] == 2


@pytest.mark.parametrize(
    "bad_answer",
    [
        {"relation": {"type": "employment", "name": "CEO of", "description": ""}},
        {"relations": [{"type": "t", "name": "n", "description": "d", "relation_ids": ["r1"]}]},
        {
            "relations": [
                {
                    "type": "t",
                    "name": "n",
                    "description": "d",
                    "relation_ids": ["r1", "r2", "r_invented"],
                }
            ]
        },
        {
            "relation": {
                "type": "t",
                "name": "n",
                "description": "d",
                "source_entity_id": "e_someone_else",
            }
        },
        {"relation": {"type": "t", "name": "n", "description": "d"}, "relations": []},
        ["not", "an", "object"],
    ],
    ids=["empty-description", "loses-input", "invented-id", "moves-endpoint", "both", "array"],
)
async def test_invalid_output_three_times_keeps_originals_and_records_issue(
    bad_answer: object,
) -> None:
    records = [
        record(
            "r1",
            source_entity_name=" 上海市 ",
            target_entity_name="徐汇区",
            name="包含行政区",
            type="空间关系",
            description="徐汇区属于上海市。",
        ),
        record(
            "r2",
            source_entity_name="上海市",
            target_entity_name="徐汇区",
            name="包含行政区",
            type="空间关系",
            description="上海市下辖徐汇区。",
        ),
    ]
    llm = ScriptedLLM(lambda request, items: bad_answer)  # type: ignore[arg-type,return-value]
    output, _, store = await run_step(records, llm)

    assert output.relation_id_mapping == {"r1": "r1", "r2": "r2"}
    assert len(llm.requests) == 3
    assert output.result["failed_group_count"] == 1
    issue = output.result["issues"][0]
    assert issue["step"] == "deduplicate_relations"
    assert issue["subject"] == {"type": "dedup_group", "id": "上海市|徐汇区|包含行政区|空间关系"}
    assert issue["code"] == "deduplication_failed"
    assert issue["severity"] == "warning"
    assert issue["message"]
    assert issue["resolution"]["action"] == "kept_original_records"
    assert issue["resolution"]["outcome"]
    assert orjson.loads(store.objects["deduplicated_relations/r1.json"])["description"] == (
        "徐汇区属于上海市。"
    )


async def test_entity_mapping_aligns_endpoints_before_grouping() -> None:
    records = [
        record("m1", source_entity_id="e_norrbeck_a", description="Same text."),
        record("m2", source_entity_id="e_norrbeck_b", description="Same text."),
    ]
    mapping = {"e_norrbeck_a": "e_norrbeck", "e_norrbeck_b": "e_norrbeck"}
    output, _, store = await run_step(records, None, mapping)
    merged_id = merged_relation_id(["m1", "m2"], "CEO of")
    assert set(output.relation_id_mapping.values()) == {merged_id}
    merged = orjson.loads(store.objects[f"deduplicated_relations/{merged_id}.json"])
    assert merged["source_entity_id"] == "e_norrbeck"
    assert output.result["remapped_relation_count"] == 2


async def test_self_loop_after_mapping_is_kept_with_original_endpoints() -> None:
    records = [
        record("loop", source_entity_id="e_sh_a", target_entity_id="e_sh_b"),
        record("ok1", description="x"),
        record("ok2", description="x"),
    ]
    mapping = {"e_sh_a": "e_sh", "e_sh_b": "e_sh"}
    output, _, store = await run_step(records, None, mapping)
    assert output.relation_id_mapping["loop"] == "loop"
    kept = orjson.loads(store.objects["deduplicated_relations/loop.json"])
    assert (kept["source_entity_id"], kept["target_entity_id"]) == ("e_sh_a", "e_sh_b")
    codes = [issue["code"] for issue in output.result["issues"]]
    assert codes == ["self_loop_after_entity_mapping"]
    assert output.relation_id_mapping["ok1"] == output.relation_id_mapping["ok2"]


async def test_mapping_artifact_none_means_no_remap() -> None:
    records = [
        record("m1", source_entity_id="e_a", description="Same."),
        record("m2", source_entity_id="e_b", description="Same."),
    ]
    output, _, _ = await run_step(
        records, None, {"e_a": "e_x", "e_b": "e_x"}, entity_id_mapping_artifact=None
    )
    assert output.relation_id_mapping == {"m1": "m1", "m2": "m2"}
    assert "entity_id_mapping" not in output.result["config"].values()


async def test_missing_mapping_artifact_is_a_clear_error() -> None:
    from relmerge import DeduplicateRelations, DeduplicateRelationsConfig, DictContext
    from relmerge.stores import MemoryStore

    step = DeduplicateRelations(DeduplicateRelationsConfig(semantic_merge=False))
    context = DictContext({"stores.objects": MemoryStore()}, {"relation_keys": []})
    with pytest.raises(InputError, match="entity_id_mapping_artifact=None"):
        await step.run(context)


async def test_semantic_merge_without_embedder_is_a_clear_error() -> None:
    with pytest.raises(InputError, match=r"models\.embedding"):
        await run_step([record("r1")], None, semantic_merge=True)


async def test_output_of_a_run_is_a_fixed_point() -> None:
    records = [
        record("r1", description="CEO since 2017."),
        record("r2", description="Chief executive since 2017."),
        record("r3", description="ceo since 2017"),
        record("r4", name="founded", description="Founded."),
    ]
    first, _, store = await run_step(records, ScriptedLLM(merge_all))
    outputs = [orjson.loads(store.objects[key]) for key in first.relation_keys]
    second, _, store2 = await run_step(outputs, ScriptedLLM(merge_all))
    assert set(second.relation_id_mapping.values()) == set(second.relation_id_mapping)
    for key in second.relation_keys:
        assert orjson.loads(store2.objects[key]) == orjson.loads(store.objects[key])


async def test_groups_run_concurrently_up_to_the_limit() -> None:
    in_flight = 0
    peak = 0

    class SlowModel(ScriptedLLM):
        async def invoke(self, request: LLMRequest):
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.01)
            in_flight -= 1
            return await super().invoke(request)

    records = [
        record(f"g{g}_{i}", name=f"relation {g}", description=f"text {i}")
        for g in range(6)
        for i in range(2)
    ]
    output, _, _ = await run_step(records, SlowModel(merge_all), concurrency=2)
    assert peak == 2
    assert len(set(output.relation_id_mapping.values())) == 6


async def test_a_misconfigured_endpoint_stops_the_run() -> None:
    llm = ScriptedLLM([ProviderError("HTTP 401 unauthorized", retryable=False)])
    with pytest.raises(ProviderError, match="401"):
        await run_step([record("r1"), record("r2")], llm)


async def test_transient_endpoint_failures_count_as_attempts() -> None:
    failure = ProviderError("HTTP 503 after 3 attempts", retryable=True, attempts=3)
    llm = ScriptedLLM([failure, merge_answer()])
    output, _, _ = await run_step([record("r1"), record("r2")], llm)
    assert len(set(output.relation_id_mapping.values())) == 1
    assert output.result["llm_requests"] == 4
    assert output.result["llm_failed_requests"] == 3


async def test_decision_log_has_the_documented_keys() -> None:
    records = [
        record("r1", description="same"),
        record("r2", description="same."),
        record("r3", description="other"),
    ]
    _, _, store = await run_step(records, ScriptedLLM(merge_all))
    lines = [orjson.loads(line) for line in step_log(store, "decisions.jsonl").splitlines()]
    assert [(d["tier"], d["verdict"]) for d in lines] == [("identical", "merge"), ("llm", "merge")]
    for decision in lines:
        assert {"member_ids", "stage", "tier", "verdict", "scores", "model", "cached"} <= set(
            decision
        )
        assert decision["stage"] == "exact"


async def test_a_merged_description_copied_from_a_cut_prompt_text_is_refused() -> None:
    """The prompt shows long descriptions cut; an answer that copies the cut is retried."""
    long_text = "Ada Lind leads Norrbeck. " * 200
    records = [record("r1", description=long_text), record("r2", description="CEO since 2017.")]
    llm = ScriptedLLM(
        [
            merge_answer(description=long_text[:100] + " …[truncated]"),
            merge_answer(description="Ada Lind leads Norrbeck as CEO since 2017."),
        ]
    )
    output, _, _ = await run_step(records, llm, prompt_description_chars=100)
    assert len(llm.requests) == 2
    assert "marker" in llm.requests[1].messages[-1].content
    (merged,) = output.relations
    # The model saw r1 cut short, so its merged text cannot stand for r1: every member's
    # whole description is kept instead.
    assert merged.description == f"{long_text.strip()}\nCEO since 2017."


async def test_an_llm_merge_of_whole_descriptions_keeps_the_llm_text() -> None:
    records = [record("r1", description="Ada leads."), record("r2", description="CEO since 2017.")]
    llm = ScriptedLLM([merge_answer(description="Ada has led it as CEO since 2017.")])
    output, _, _ = await run_step(records, llm)
    (merged,) = output.relations
    assert merged.description == "Ada has led it as CEO since 2017."


async def test_small_batches_compare_every_pair_once_and_find_every_same_fact() -> None:
    """Two facts (2019, 1702) alternating in a group larger than the batch: every 2019
    mention ends in one relation, every 1702 mention in another, and no question repeats
    (a part merged from members known distinct from another part is distinct from it)."""
    years = ["2019", "1702", "2019", "1702", "2019", "2019"]
    records = [
        record(f"r{i}", description=f"Led it since {year} (mention {i}).")
        for i, year in enumerate(years)
    ]

    def split_by_year(request: LLMRequest, items: list[dict[str, Any]]) -> dict[str, Any]:
        parts: dict[str, list[dict[str, Any]]] = {}
        for item in items:
            parts.setdefault("2019" if "2019" in item["description"] else "1702", []).append(item)
        return {
            "relations": [
                {
                    "type": "employment",
                    "name": "CEO of",
                    "description": f"Led it since {year}.",
                    "attributes": {},
                    "relation_ids": [item["relation_id"] for item in members],
                }
                for year, members in parts.items()
            ]
        }

    llm = ScriptedLLM(split_by_year)
    output, _, _ = await run_step(records, llm, llm_batch_size=2)
    mapping = output.relation_id_mapping
    assert len({mapping[f"r{i}"] for i, y in enumerate(years) if y == "2019"}) == 1
    assert len({mapping[f"r{i}"] for i, y in enumerate(years) if y == "1702"}) == 1
    assert len(set(mapping.values())) == 2
    asked = [frozenset(_ids(request)) for request in llm.requests]
    assert len(asked) == len(set(asked))
