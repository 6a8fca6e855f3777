"""Canaries inside real requests: where they go, how they are read, what they cannot do."""

from __future__ import annotations

from typing import Any

from relmerge.decide.canary_mix import CertainPair, mix
from relmerge.prompts.cluster_relations import validate_answer


def _record(rid: str, description: str = "A fact about the two of them.") -> dict[str, Any]:
    return {
        "relation_id": rid,
        "source_entity_name": "A",
        "target_entity_name": "B",
        "description": description,
    }


def _show(cluster: list[int], left_out: frozenset[int]) -> dict[str, Any]:
    return _record(f"rel_{cluster[0]:03d}")


def test_a_canary_record_bridges_no_two_real_records() -> None:
    records = [_record("r1"), _record("c9"), _record("r2")]
    answer = {"mapping_table": {"r1": ["c9"], "c9": ["r2"]}}
    outcome = validate_answer(answer, records, {1: None})
    assert outcome.groups == []  # r1 and r2 were never grouped with each other
    assert outcome.together == [[0, 1, 2]]  # but the canary's answer is read


def test_a_group_the_model_mixed_a_foreign_canary_into_writes_no_fields() -> None:
    records = [_record("r1"), _record("c9"), _record("r2")]
    entry = {"relation_id": "r1", "Node1": "A", "Node2": "B", "Relation": "x", "Type": "t"}
    answer = {
        "mapping_table": {"r1": ["r2", "c9"]},
        "relation_list": [{**entry, "Description": "text of c9 leaked"}],
    }
    assert validate_answer(answer, records, {1: None}).fields == {}
    # A copy of r1 in the group is the group's own text: its fields stand.
    assert validate_answer(answer, records, {1: 0}).fields[0]["description"] == (
        "text of c9 leaked"
    )


def test_mix_adds_a_copy_after_its_record_and_reads_the_answers() -> None:
    batch = [[0], [1]]
    keep = CertainPair(1, 2, "keep_both")  # unit 2 is outside the batch: added alone
    mixed = mix(batch, [keep], _show, lambda m: _record(f"m{m}"), "seed")
    # the reversed twin, a copy, and the two records of a near-miss pair
    assert mixed.cluster_at.count(None) == 4
    ids = [r["relation_id"] for r in mixed.records]
    assert len(set(ids)) == len(ids)  # added records have ids of their own, shaped alike
    (copy,) = [i for i in mixed.repeats]
    assert mixed.repeats[copy] < copy  # after the record it repeats
    assert mixed.cluster_at[0] is not None  # a real record comes first
    assert mix(batch, [keep], _show, lambda m: _record(f"m{m}"), "seed") == mixed  # seeded
    table: dict[str, list[str]] = {ids[mixed.repeats[copy]]: [ids[copy]]}
    outcome = validate_answer({"mapping_table": table}, mixed.records, mixed.canary)
    assert sorted(mixed.answers(outcome), key=str) == [True, True, True]
    assert mixed.real(outcome.groups) == []  # real answer: nothing merged


def test_a_model_that_lumps_the_near_miss_pair_together_answers_it_wrong() -> None:
    mixed = mix([[0], [1]], [], _show, lambda m: _record(f"m{m}"), "seed")
    ((x, y),) = [(x, y) for x, y, expected in mixed.checks if expected == "keep_both"]
    assert mixed.cluster_at[x] is None and mixed.cluster_at[y] is None
    assert mixed.records[x]["description"] != mixed.records[y]["description"]
    ids = [r["relation_id"] for r in mixed.records]
    outcome = validate_answer({"mapping_table": {ids[0]: ids}}, mixed.records, mixed.canary)
    answers = dict(zip(mixed.checks, mixed.answers(outcome), strict=True))
    assert answers[(x, y, "keep_both")] is False
    assert mixed.real(outcome.groups) == [[0, 1]]  # the real answer stands as given


def test_a_canary_id_is_found_when_every_id_of_the_shape_is_taken() -> None:
    from relmerge.decide.canary_mix import _other_id

    taken = {f"关系{i}" for i in range(10)}
    made = _other_id("关系0", set(taken), seed=1)
    assert made not in taken and made.startswith("关系")
    assert made == _other_id("关系0", set(taken), seed=1)  # seeded: the same batch, the same id
    shaped = _other_id("rel_0001", {"rel_0001"}, seed=1)
    assert len(shaped) == len("rel_0001") and shaped.startswith("rel_")  # the shape kept


def test_a_made_up_record_never_takes_an_id_the_request_holds() -> None:
    """Short ids: a copy or near-miss record must not take a cluster member's id or the
    id of a record added for a unit outside the batch (the answer would name it)."""

    def show(cluster: list[int], left_out: frozenset[int]) -> dict[str, Any]:
        record = _record(f"r{cluster[0]}")
        if cluster[0] == 0:
            record["merged_from"] = ["r0", "r7", "r8"]
        return record

    keep = CertainPair(1, 2, "keep_both")  # unit 2 outside the batch: added as r2
    for number in range(60):
        mixed = mix([[0], [1]], [keep], show, lambda m: _record(f"r{m}"), f"seed{number}")
        ids = [r["relation_id"] for r in mixed.records]
        assert len(set(ids)) == len(ids)
        made = {ids[i] for i, c in enumerate(mixed.cluster_at) if c is None} - {"r2"}
        assert not made & {"r0", "r7", "r8"}


def test_an_empty_batch_mixes_nothing() -> None:
    mixed = mix([], [], _show, lambda m: _record(f"m{m}"), "seed")
    assert mixed.records == [] and mixed.checks == []
