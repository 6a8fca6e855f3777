from __future__ import annotations

from relmerge.providers.embedding import HashEmbedder
from tests.factories import record, run_step


def city(relation_id: str, target_id: str, target_name: str) -> dict[str, object]:
    return record(
        relation_id,
        source_entity_id="e_jiangsu",
        source_entity_name="Jiangsu",
        target_entity_id=target_id,
        target_entity_name=target_name,
        type="administrative",
        name="has subdivision",
        description=f"{target_name} is a prefecture-level city of Jiangsu.",
    )


async def test_same_relation_toward_alike_entities_is_reported_not_merged() -> None:
    records = [
        record(
            "n1",
            target_entity_id="e_norrbeck_inc",
            target_entity_name="Norrbeck Systems Inc.",
            source_entity_id="e_ada",
            source_entity_name="Ada",
            description="Ada is CEO.",
        ),
        record(
            "n2",
            target_entity_id="e_norrbeck",
            target_entity_name="Norrbeck Systems",
            source_entity_id="e_ada",
            source_entity_name="Ada",
            description="Ada is CEO.",
        ),
        city("c1", "e_nanjing", "Nanjing"),
        city("c2", "e_nantong", "Nantong"),
    ]
    output, _, _ = await run_step(records, None, embedder=HashEmbedder(), similarity_threshold=0.5)
    assert set(output.relation_id_mapping.values()) == {"n1", "n2", "c1", "c2"}  # no merge
    reports = [i for i in output.result["issues"] if i["code"] == "possible_entity_duplicate"]
    assert [r["subject"]["id"] for r in reports] == ["e_norrbeck|e_norrbeck_inc"]
    assert reports[0]["severity"] == "info"
