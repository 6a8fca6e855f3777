"""``GoldJudge`` recognises records a request shows under other ids (a packed request's
aliases ``r1``, ``r2``, …, without ``merged_from``) by their text, given the labelled
records: one record's description (maybe cut), a merged cluster's joined descriptions;
where one text is in records of several labels, the endpoint names and the name decide.
Made-up text stays unknown. Data: the shared dev set."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from itertools import count
from typing import Any

import orjson
import pytest

from relmerge.decide.merged import joined_description
from relmerge.eval.gold import labelled_relations, load_gold
from relmerge.eval.gold_judge import GoldJudge
from relmerge.prompts.base import TRUNCATED, truncate
from tests.support.dev_cli import DEV

pytestmark = pytest.mark.skipif(not DEV.is_dir(), reason="shared dev set not present")

CHARS = 2000  # prompt_description_chars' default


@pytest.fixture(scope="module")
def gold() -> dict[str, str]:
    return load_gold(DEV / "gold.jsonl")


@pytest.fixture(scope="module")
def relations() -> list[dict[str, Any]]:
    return labelled_relations(DEV / "gold.jsonl")


@pytest.fixture(scope="module")
def judge(gold: dict[str, str], relations: list[dict[str, Any]]) -> GoldJudge:
    return GoldJudge(gold, records=relations)


def shown(relation: dict[str, Any], alias: str, chars: int = CHARS) -> dict[str, Any]:
    """One relation as a packed request shows it: under an alias, no ``merged_from``."""
    return {
        "relation_id": alias,
        "source_entity_name": relation["source_entity_name"],
        "target_entity_name": relation["target_entity_name"],
        "direction": "A->B",
        "type": relation["type"],
        "name": relation["name"],
        "description": truncate(relation["description"], chars),
        "attributes": relation["attributes"],
    }


def shown_merged(
    members: Sequence[dict[str, Any]], alias: str, chars: int = CHARS
) -> dict[str, Any]:
    """A merged cluster as a packed request shows it: its lead's fields, its members'
    distinct descriptions joined (the whole cut), under an alias."""
    record = shown(members[0], alias, chars)
    text = joined_description(member["description"] for member in members)
    record["description"] = truncate(text, chars)
    record["mentions"] = len(members)
    return record


def clusters(
    relations: list[dict[str, Any]], gold: dict[str, str]
) -> dict[str, list[dict[str, Any]]]:
    by_label: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for relation in relations:
        by_label[gold[relation["relation_id"]]].append(relation)
    return by_label


def label(judge: GoldJudge, record: dict[str, Any]) -> str:
    return judge._labels([record])[0]


def test_every_aliased_dev_record_is_labelled_as_its_original(
    judge: GoldJudge, gold: dict[str, str], relations: list[dict[str, Any]]
) -> None:
    records = [shown(r, f"r{i}") for i, r in enumerate(relations, start=1)]
    assert judge._labels(records) == [gold[r["relation_id"]] for r in relations]
    # Without the labelled records, an alias is an unknown id (as before).
    assert GoldJudge(gold)._labels(records[:2]) == ["unknown:r1", "unknown:r2"]


def test_a_cut_description_is_recognised_by_its_lines_and_prefix(
    judge: GoldJudge, gold: dict[str, str], relations: list[dict[str, Any]]
) -> None:
    for chars, at_least in ((CHARS, 4), (100, 9), (40, 250)):
        cut = [r for r in relations if len(r["description"]) > chars]
        assert len(cut) >= at_least
        for number, relation in enumerate(cut, start=1):
            record = shown(relation, f"r{number}", chars)
            assert record["description"].endswith(TRUNCATED)
            assert label(judge, record) == gold[relation["relation_id"]]


def test_a_merged_clusters_joined_text_is_recognised(
    judge: GoldJudge, gold: dict[str, str], relations: list[dict[str, Any]]
) -> None:
    merged = [m for m in clusters(relations, gold).values() if len(m) > 1]
    assert len(merged) > 100
    for chars in (CHARS, 150):
        for cluster in merged:
            # each member as lead, so every shown name and endpoint pair is tried
            for lead in range(len(cluster)):
                members = [cluster[lead], *cluster[:lead], *cluster[lead + 1 :]]
                expected = gold[cluster[0]["relation_id"]]
                assert label(judge, shown_merged(members, "r1", chars)) == expected


def _pair(
    relations: list[dict[str, Any]],
    gold: dict[str, str],
    category: str,
    ends: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two records of one documented hard-negative pair of ``category``: of swapped
    endpoint names (``ends="swapped"``), or of the same ones and another name."""
    by_label = clusters(relations, gold)
    lines = (DEV / "hard_negatives.jsonl").read_bytes().splitlines()
    for pair in (orjson.loads(line) for line in lines if line.strip()):
        if pair["category"] != category:
            continue
        for a in by_label[pair["cluster_a"]]:
            for b in by_label[pair["cluster_b"]]:
                a_ends = (a["source_entity_name"], a["target_entity_name"])
                b_ends = (b["source_entity_name"], b["target_entity_name"])
                if ends == "swapped" and a_ends == b_ends[::-1]:
                    return a, b
                if ends == "same" and a_ends == b_ends and a["name"] != b["name"]:
                    return a, b
    raise AssertionError(f"no {category} pair in the dev set")  # pragma: no cover


@pytest.mark.parametrize(
    ("category", "ends"),
    [("inverse_relation_swapped_endpoints", "swapped"), ("same_pair_different_relation", "same")],
)
def test_one_text_of_two_labels_is_told_apart_by_endpoints_then_name(
    gold: dict[str, str], relations: list[dict[str, Any]], category: str, ends: str
) -> None:
    a, b = _pair(relations, gold, category, ends)
    assert gold[a["relation_id"]] != gold[b["relation_id"]]
    # b states its fact in a's words: one text, two labels (swapped endpoints: under a's
    # name too, so that only the endpoint names tell them apart)
    b = {**b, "description": a["description"]}
    if ends == "swapped":
        b["name"] = a["name"]
    labelled = [b if r["relation_id"] == b["relation_id"] else r for r in relations]
    for order in (labelled, labelled[::-1]):  # not the first record found
        judge = GoldJudge(gold, records=order)
        assert label(judge, shown(a, "r1")) == gold[a["relation_id"]]
        assert label(judge, shown(b, "r2")) == gold[b["relation_id"]]
        # a cut text too (matched by prefix)
        assert label(judge, shown(b, "r3", 30)) == gold[b["relation_id"]]


def test_made_up_text_stays_unknown_and_its_copy_shares_its_label(
    judge: GoldJudge, relations: list[dict[str, Any]], gold: dict[str, str]
) -> None:
    real = relations[0]
    made_up = {
        **shown(real, "r7"),
        "name": "lent money to",
        "description": f"{real['source_entity_name']} lent two million euros to "
        f"{real['target_entity_name']}.",
    }
    copy = {**made_up, "relation_id": "r9"}
    empty = {**shown(real, "r8"), "description": ""}
    labels = judge._labels([shown(real, "r1"), made_up, copy, empty])
    assert labels[0] == gold[real["relation_id"]] and labels[3] == "unknown:r8"
    assert labels[1] == labels[2] and labels[1].startswith("unknown:")  # one made-up fact
    # A cut line too short to be a safe prefix matches only an equal line.
    assert label(judge, {**shown(real, "r1"), "description": f"Laiwu became {TRUNCATED}"}) == (
        "unknown:r1"
    )


def test_a_copy_of_a_known_record_takes_its_label_first(
    gold: dict[str, str], relations: list[dict[str, Any]]
) -> None:
    """A word-for-word copy (a canary) of a record gold knows by id shares its label,
    even where its text alone would be read otherwise."""
    real = relations[0]
    other = {**relations[1], "description": real["description"]}  # same text, other label
    judge = GoldJudge(gold, records=[other, real])
    original = {**shown(real, real["relation_id"]), "name": other["name"]}
    original.update(
        source_entity_name=other["source_entity_name"],
        target_entity_name=other["target_entity_name"],
    )
    copy = {**original, "relation_id": "rel_000000000000"}
    assert judge._labels([original, copy]) == [gold[real["relation_id"]]] * 2


def test_known_ids_are_answered_as_before(
    judge: GoldJudge, gold: dict[str, str], relations: list[dict[str, Any]]
) -> None:
    """An id gold knows wins over the text shown (and a merged record's ``merged_from``)."""
    a, b = relations[0], relations[1]
    assert gold[a["relation_id"]] != gold[b["relation_id"]]
    record = {**shown(b, a["relation_id"])}
    assert label(judge, record) == gold[a["relation_id"]]
    merged = {**shown(b, "rel_intermediate"), "merged_from": [a["relation_id"]]}
    assert label(judge, merged) == gold[a["relation_id"]]


def _blocks(
    relations: list[dict[str, Any]], gold: dict[str, str]
) -> tuple[list[dict[str, Any]], list[set[frozenset[str]]]]:
    """Three dev blocks as a packed request shows them (aliases numbered across the
    request; the first cluster of two or more members of each block shown merged, once
    more beside one of its members), and each block's expected groups of aliases."""
    mapping = orjson.loads((DEV / "entity_id_mapping.json").read_bytes())
    by_pair: dict[frozenset[str], list[dict[str, Any]]] = defaultdict(list)
    for relation in relations:
        ends = (relation["source_entity_id"], relation["target_entity_id"])
        by_pair[frozenset(mapping.get(e, e) for e in ends)].append(relation)
    rich = [rs for rs in by_pair.values() if len({gold[r["relation_id"]] for r in rs}) >= 3]
    aliases = count(1)
    blocks, expected = [], []
    for number, block in enumerate(rich[:3], start=1):
        records: list[dict[str, Any]] = []
        labels: list[str] = []
        by_label = clusters(block, gold)
        multi = next(m for m in by_label.values() if len(m) > 1)
        records.append(shown_merged(multi, f"r{next(aliases)}"))
        labels.append(gold[multi[0]["relation_id"]])
        for relation in block:
            records.append(shown(relation, f"r{next(aliases)}"))
            labels.append(gold[relation["relation_id"]])
        groups: dict[str, set[str]] = defaultdict(set)
        for record, cluster in zip(records, labels, strict=True):
            groups[cluster].add(record["relation_id"])
        expected.append({frozenset(g) for g in groups.values() if len(g) > 1})
        entities = {"A": {"name": block[0]["source_entity_name"]}}
        entities["B"] = {"name": block[0]["target_entity_name"]}
        blocks.append({"block": f"b{number}", "entities": entities, "records": records})
    return blocks, expected


def test_an_aliased_packed_request_groups_the_right_records(
    judge: GoldJudge, gold: dict[str, str], relations: list[dict[str, Any]]
) -> None:
    blocks, expected = _blocks(relations, gold)
    assert len(blocks) == 3 and all(expected)
    answer = judge.answer("relation_cluster_many", blocks)
    assert [part["block"] for part in answer["blocks"]] == ["b1", "b2", "b3"]
    for part, groups in zip(answer["blocks"], expected, strict=True):
        found = {frozenset(ids) for ids in part["mapping_table"].values()}
        assert found == groups
    # By id alone, every alias is a fact of its own: nothing is grouped.
    unaware = GoldJudge(gold).answer("relation_cluster_many", blocks)
    assert all(not part["mapping_table"] for part in unaware["blocks"])


def test_a_packed_name_that_is_also_a_labelled_id_is_read_by_its_text() -> None:
    """Packed requests name records r1, r2, …; a graph whose ids are ``r1``, ``r2`` too
    must not have a packed record read as the labelled record of that id."""
    texts = [
        "Ada founded Norrbeck in 1998.",
        "Ada left Norrbeck in 2009.",
        "Norrbeck was founded by Ada.",
    ]
    labelled = [
        {
            "relation_id": f"r{i + 1}",
            "source_entity_name": "Ada",
            "target_entity_name": "Norrbeck",
            "type": "org",
            "name": "founded",
            "description": text,
            "attributes": {},
        }
        for i, text in enumerate(texts)
    ]
    gold = {"r1": "founding", "r2": "departure", "r3": "founding"}
    judge = GoldJudge(gold, records=labelled)
    # The pack shows r3's text as r1 and r1's text as r2: the two founding records.
    block = {
        "block": "b1",
        "records": [
            {**labelled[2], "relation_id": "r1"},
            {**labelled[0], "relation_id": "r2"},
            {**labelled[1], "relation_id": "r3"},
        ],
    }
    (part,) = judge.answer("relation_cluster_many", [block])["blocks"]
    assert {frozenset(ids) for ids in part["mapping_table"].values()} == {frozenset({"r1", "r2"})}
    assert [entry["relation_id"] for entry in part["relation_list"]] == ["r1"]
