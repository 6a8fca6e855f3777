"""Small batches for the build tests, with their gold clusters."""

from __future__ import annotations

from typing import Any

from tests.factories import record


def _pair(source: tuple[str, str], target: tuple[str, str], **fields: Any) -> dict[str, Any]:
    return {
        "source_entity_id": source[0],
        "source_entity_name": source[1],
        "target_entity_id": target[0],
        "target_entity_name": target[1],
        **fields,
    }


NORRBECK = ("e_norrbeck", "Norrbeck Systems")
NORRBECK_ALIAS = ("e_norrbeck_2", "Norrbeck")  # mapped to e_norrbeck
ADA = ("e_ada", "Ada Lind")
QUILL = ("e_quill", "Quill Labs")
OSLO = ("e_oslo", "Oslo")

# relation id -> (gold cluster, record)
BATCH: dict[str, tuple[str, dict[str, Any]]] = {
    item["relation_id"]: (cluster, item)
    for cluster, item in [
        (
            "ceo",
            record(
                "c1",
                **_pair(NORRBECK, ADA),
                description="Ada Lind became CEO of Norrbeck Systems in 2015.",
            ),
        ),
        (
            "ceo",
            record(
                "c2",
                **_pair(NORRBECK_ALIAS, ADA),
                description="Since 2015 Ada Lind has run Norrbeck as its chief executive.",
            ),
        ),
        (
            "ceo",
            record(
                "c3",
                **_pair(NORRBECK, ADA),
                name="chief executive of",
                description="Ada Lind is chief executive of Norrbeck Systems, appointed in 2015.",
            ),
        ),
        (
            "ceo-1990",
            record(
                "c4",
                **_pair(NORRBECK, ADA),
                description="Ada Lind's mother was CEO of Norrbeck Systems in 1990.",
            ),
        ),
        (
            "bought",
            record(
                "a1",
                **_pair(NORRBECK, QUILL),
                type="corporate",
                name="acquired",
                description="Norrbeck Systems acquired Quill Labs in 2006.",
            ),
        ),
        (
            "bought",
            record(
                "a2",
                **_pair(NORRBECK_ALIAS, QUILL),
                type="corporate",
                name="bought",
                description="In 2006 Norrbeck bought the start-up Quill Labs.",
            ),
        ),
        (
            "hq",
            record(
                "h1",
                **_pair(NORRBECK, OSLO),
                type="location",
                name="headquartered in",
                description="Norrbeck Systems has its head office in Oslo.",
            ),
        ),
    ]
}
RECORDS = [item for _, item in BATCH.values()]
GOLD = {relation_id: cluster for relation_id, (cluster, _) in BATCH.items()}
ENTITY_MAPPING = {"e_norrbeck_2": "e_norrbeck"}


def partition(mapping: dict[str, str]) -> set[frozenset[str]]:
    """The groups of input ids that share an output relation."""
    groups: dict[str, set[str]] = {}
    for old, new in mapping.items():
        groups.setdefault(new, set()).add(old)
    return {frozenset(group) for group in groups.values()}


def gold_partition(ids: list[str] | None = None) -> set[frozenset[str]]:
    chosen = ids or list(GOLD)
    return partition({relation_id: GOLD[relation_id] for relation_id in chosen})
