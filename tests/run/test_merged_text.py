"""An exact-key group gets the same merged text whichever stage decides it."""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson
import pytest

from relmerge.eval.gold import load_gold
from relmerge.eval.gold_judge import GoldJudge
from relmerge.normalize import normalize_key_text
from relmerge.providers.base import LLMRequest
from relmerge.providers.embedding import HashEmbedder
from relmerge.providers.fake import ScriptedLLM
from tests.factories import record, run_step
from tests.support.dev_cli import DEV

# Rules decide less, so that the LLM decides the exact-key group; no canary records.
LLM_ONLY: dict[str, Any] = {"auto_merge_cosine": None, "auto_keep_cosine": -1.0, "canaries": 0}

ACQUIRED = {
    "source_entity_id": "e_norrbeck",
    "target_entity_id": "e_quill",
    "source_entity_name": "Norrbeck",
    "target_entity_name": "Quill Labs",
    "type": "corporate",
    "name": "acquired",
}
RECORDS = [
    # One exact-key group of two records whose descriptions differ.
    record("q1", **ACQUIRED, description="Norrbeck acquired Quill Labs in 2006."),
    record("q2", **ACQUIRED, description="Quill Labs was bought by Norrbeck for $40M."),
    # Another block with a question of its own, so that a packed request holds two blocks.
    record("c1", name="CEO of", description="Ada Lind leads Norrbeck."),
    record("c2", name="chief executive of", description="Ada Lind heads Norrbeck."),
]


def fused(records: list[dict[str, Any]]) -> str:
    """The one text a consistent model writes for these records, whatever it is asked."""
    return "Fused: " + " + ".join(sorted(str(r["description"]) for r in records))


def _entry(records: list[dict[str, Any]]) -> dict[str, Any]:
    first = records[0]
    ids = [r["relation_id"] for r in records]
    return {
        "relation_list": [
            {
                "relation_id": ids[0],
                "Node1": first["source_entity_name"],
                "Node2": first["target_entity_name"],
                "Relation": first["name"],
                "Type": first["type"],
                "Description": fused(records),
                "Attr": {},
            }
        ],
        "mapping_table": {ids[0]: ids},
    }


def consistent(request: LLMRequest, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Merges every question's records, fusing them into the same text in every task."""
    if request.task == "relation_merge":
        first = records[0]
        relation = {k: first[k] for k in ("type", "name", "attributes")}
        return {"relation": {**relation, "description": fused(records)}}
    if request.task == "relation_judge":
        existing = next(r for r in records if r["role"] == "existing")
        return {"verdict": "merge", "reason": "same", "duplicate_of": existing["relation_id"]}
    if request.task == "relation_cluster_many":
        return {"blocks": [{"block": b["block"], **_entry(b["records"])} for b in records]}
    return _entry(records)


@pytest.mark.parametrize("pack_tokens", [0, 8000], ids=["alone", "packed"])
async def test_a_two_record_exact_group_has_the_models_fused_text_in_either_stage(
    pack_tokens: int,
) -> None:
    """Decided by ``relation_merge`` (``--no-semantic``) or inside its block's request
    (alone or packed), the group comes out as the model's validated fused text."""
    texts = {}
    for semantic in (False, True):
        llm = ScriptedLLM(consistent)
        output, _, _ = await run_step(
            RECORDS,
            llm,
            embedder=HashEmbedder() if semantic else None,
            llm_pack_tokens=pack_tokens,
            **LLM_ONLY,
        )
        mapping = output.relation_id_mapping
        assert mapping["q1"] == mapping["q2"]
        merged = next(r for r in output.relations if r.relation_id == mapping["q1"])
        texts[semantic] = merged.description
        if semantic and pack_tokens:
            assert [r.task for r in llm.requests] == ["relation_cluster_many"]
    expected = fused([{"description": r["description"]} for r in RECORDS[:2]])
    assert texts == {False: expected, True: expected}


def _no_fields(request: LLMRequest, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Merges, but writes no merged relation (a mapping table alone)."""
    answer = consistent(request, records)
    if request.task == "relation_cluster_many":
        for block in answer["blocks"]:
            block.pop("relation_list")
    elif request.task == "relation_cluster":
        answer.pop("relation_list")
    return answer


@pytest.mark.parametrize("pack_tokens", [0, 8000], ids=["alone", "packed"])
async def test_a_group_merged_without_a_written_text_keeps_both_member_texts(
    pack_tokens: int,
) -> None:
    output, _, _ = await run_step(
        RECORDS,
        ScriptedLLM(_no_fields),
        embedder=HashEmbedder(),
        llm_pack_tokens=pack_tokens,
        **LLM_ONLY,
    )
    mapping = output.relation_id_mapping
    merged = next(r for r in output.relations if r.relation_id == mapping["q1"])
    assert merged.description == "\n".join(r["description"] for r in RECORDS[:2])


def _exact_key(record: dict[str, object], mapping: dict[str, str]) -> tuple[object, ...]:
    return (
        mapping.get(str(record["source_entity_id"]), record["source_entity_id"]),
        mapping.get(str(record["target_entity_id"]), record["target_entity_id"]),
        normalize_key_text(str(record["name"])),
        normalize_key_text(str(record["type"])),
    )


@pytest.mark.skipif(not DEV.is_dir(), reason="needs ../shared/data/dev")
async def test_an_exact_key_group_merged_in_its_block_has_the_exact_stages_text() -> None:
    """The dev set's records that share an exact key with another, decided with the
    gold-answering model: by ``relation_merge`` in the exact stage (``--no-semantic``) or
    inside their block's ``relation_cluster`` request."""
    everything = [
        orjson.loads(line) for line in (DEV / "relations.jsonl").read_bytes().splitlines()
    ]
    mapping = orjson.loads((DEV / "entity_id_mapping.json").read_bytes())
    counts = Counter(_exact_key(r, mapping) for r in everything)
    records = [r for r in everything if counts[_exact_key(r, mapping)] > 1]
    gold = load_gold(DEV / "gold.jsonl")
    texts = {}
    for semantic in (False, True):
        output, _, _ = await run_step(
            records,
            GoldJudge(gold, records=everything),
            mapping,
            embedder=HashEmbedder() if semantic else None,
            semantic_merge=semantic,
        )
        members: dict[str, list[str]] = {}
        for old, new in output.relation_id_mapping.items():
            members.setdefault(new, []).append(old)
        outputs = {relation.relation_id: relation for relation in output.relations}
        texts[semantic] = {
            frozenset(ids): outputs[new].description for new, ids in members.items() if len(ids) > 1
        }
    inputs = {str(r["relation_id"]): r for r in records}
    compared = 0
    for group, text in texts[False].items():
        keys = {_exact_key(inputs[i], mapping) for i in group}
        if len(keys) == 1 and group in texts[True]:
            assert texts[True][group] == text
            compared += 1
    assert compared >= 3
