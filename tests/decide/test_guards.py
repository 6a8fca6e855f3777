"""Guards per language, numbers written in several ways, and symmetry by name."""

from __future__ import annotations

import pytest

from relmerge.decide.features import relation_features
from relmerge.decide.guards import fired_guards, substituted
from relmerge.decide.lexicon import load_lexicon
from relmerge.decide.numbers import extract_numbers, numbers_conflict
from relmerge.model import ExtractedRelation
from tests.factories import record

LEX = load_lexicon()


def guards(a: dict[str, str], b: dict[str, str]) -> list[str]:
    fa = relation_features(ExtractedRelation.model_validate(record("a", **a)), LEX)
    fb = relation_features(ExtractedRelation.model_validate(record("b", **b)), LEX)
    return fired_guards(fa, fb)


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("a ２０％ stake", {20.0}),
        ("持股比例为百分之二十", {20.0}),
        ("悬赏五百克朗", {500.0}),
        ("5 000 crowns or 5,000 crowns", {5000.0}),
        ("第十四章", {14.0}),
        ("in book two", {2.0}),
        ("dans le tome deux", {2.0}),
        ("二〇一七年", {2017.0}),
        ("ceo 1998-2009", {1998.0, 2009.0}),
    ],
)
def test_numbers_are_read_in_every_writing(text: str, numbers: set[float]) -> None:
    assert extract_numbers(text, LEX) == numbers


def test_numbers_conflict_only_for_other_quantities_or_periods() -> None:
    assert numbers_conflict(frozenset({20.0, 2011.0}), frozenset({35.0, 2016.0}))
    assert numbers_conflict(frozenset({2001.0}), frozenset({1988.0, 2001.0}))  # two periods
    assert not numbers_conflict(frozenset({20.0}), frozenset({20.0, 2011.0}))
    assert not numbers_conflict(frozenset(), frozenset({2017.0}))  # untimed vs timed


@pytest.mark.parametrize(
    ("a", "b", "guard"),
    [
        (
            {"name": "ally of", "description": "Bram is Corvin's ally."},
            {"name": "enemy of", "description": "Bram is Corvin's enemy."},
            "opposite",
        ),
        (
            {"name": "盟友", "description": "两人是盟友。"},
            {"name": "敌人", "description": "两人是敌人。"},
            "opposite",
        ),
        (
            {"name": "allié de", "description": "Bram est l'allié de Corvin."},
            {"name": "ennemi de", "description": "Bram est l'ennemi de Corvin."},
            "opposite",
        ),
        (
            {"name": "supports", "description": "Norrbeck supports the standard."},
            {"name": "opposes", "description": "Norrbeck opposes the standard."},
            "opposite",
        ),
        (
            {"name": "acquired", "description": "Norrbeck bought Quill."},
            {"name": "was acquired by", "description": "Norrbeck and Quill."},
            "direction",
        ),
        (
            {"name": "收购", "description": "诺尔贝克收购了奎尔。"},
            {"name": "被收购", "description": "诺尔贝克与奎尔。"},
            "direction",
        ),
        (
            {"name": "a racheté", "description": "Norrbeck a racheté Quill."},
            {"name": "racheté par", "description": "Norrbeck et Quill."},
            "direction",
        ),
        (
            {"name": "包含", "description": "浙江省包含杭州市。"},
            {"name": "隶属于", "description": "杭州市与浙江省。"},
            "direction",
        ),
        (
            {"name": "CEO of", "description": "Ada leads the firm."},
            {"name": "CTO of", "description": "Ada leads the firm."},
            "role",
        ),
        (
            {"name": "首席执行官", "description": "她领导公司。"},
            {"name": "首席技术官", "description": "她领导公司。"},
            "role",
        ),
        (
            {"name": "PDG de", "description": "Ada dirige la société."},
            {"name": "directrice technique de", "description": "Ada dirige la société."},
            "role",
        ),
        (
            {"name": "member of", "description": "Iselde is a member of the order."},
            {"name": "member of", "description": "Iselde is not a member of the order."},
            "negation",
        ),
        (
            {"name": "属于", "description": "该岛属于该省。"},
            {"name": "属于", "description": "该岛不是该省的一部分。"},
            "negation",
        ),
        (
            {"name": "membre de", "description": "Iselde est membre de l'ordre."},
            {"name": "membre de", "description": "Iselde n'est pas membre de l'ordre."},
            "negation",
        ),
        (
            {"name": "holds stake in", "description": "A 20% stake."},
            {"name": "holds stake in", "description": "A 35% stake."},
            "numbers",
        ),
        (
            {"name": "placed a bounty on", "description": "500 crowns for his capture."},
            {"name": "悬赏", "description": "悬赏五千克朗捉拿他。"},
            "numbers",
        ),
    ],
)
def test_guard_fires(a: dict[str, str], b: dict[str, str], guard: str) -> None:
    assert guard in guards(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            {"name": "CEO of", "description": "Ada has been CEO since 2017."},
            {"name": "chief executive officer", "description": "Ada is the chief executive."},
        ),
        (
            {"name": "holds stake in", "description": "A 20% stake bought in 2011."},
            {"name": "持股", "description": "持股比例为百分之二十（2011年）。"},
        ),
        (
            {"name": "placed a bounty on", "description": "A bounty of 500 crowns."},
            {"name": "悬赏", "description": "悬赏五百克朗。"},
        ),
        (
            {"name": "capital of", "description": "The city is the capital of the province."},
            {"name": "省会", "description": "该市是该省的省会。"},
        ),
    ],
)
def test_same_fact_in_other_words_fires_no_guard(a: dict[str, str], b: dict[str, str]) -> None:
    assert guards(a, b) == []


@pytest.mark.parametrize(
    ("name", "symmetric"),
    [
        ("married to", True),
        ("sister of", True),
        ("接壤", True),
        ("frère de", True),
        ("rival of", True),
        ("rival claimant to the throne", False),  # "claimant", "throne": unexplained words
        ("co-founder with", True),
        ("共同创始人", True),
        ("parent of", False),
        ("包含", False),
        ("acquired", False),
    ],
)
def test_symmetry_is_decided_by_the_relation_name(name: str, symmetric: bool) -> None:
    relation = ExtractedRelation.model_validate(record("r", name=name, type="spatial"))
    assert relation_features(relation, LEX).symmetric is symmetric


@pytest.mark.parametrize(
    ("name", "symmetry"),
    [
        ("married to", "symmetric"),
        ("parent of", "directed"),
        ("was appointed by", "directed"),  # a passive form is directed
        ("CEO of", "directed"),  # a role is directed
        ("capital of", "directed"),
        ("cousin of", "symmetric"),
        ("表亲", "unknown"),  # no list names it: the LLM decides its direction
        ("co-located with", "unknown"),
        ("rival of", "symmetric"),
        ("derby rival of", "unknown"),  # "derby" is no word of the vocabulary: the LLM's call
        ("related", "unknown"),  # a generic name says nothing, its direction neither
        ("ally of, commander of", "unknown"),  # symmetric and directed words: unknown
    ],
)
def test_symmetry_is_symmetric_directed_or_unknown(name: str, symmetry: str) -> None:
    relation = ExtractedRelation.model_validate(record("r", name=name))
    assert relation_features(relation, LEX).symmetry == symmetry


def test_symmetry_ignores_the_type_label() -> None:
    # The same type holds both 接壤 (symmetric) and 包含 (directed).
    contains = ExtractedRelation.model_validate(record("r", name="包含", type="空间关系"))
    borders = ExtractedRelation.model_validate(record("s", name="接壤", type="空间关系"))
    assert not relation_features(contains, LEX).symmetric
    assert relation_features(borders, LEX).symmetric


@pytest.mark.parametrize(
    ("a", "b", "guard"),
    [
        # Receiving / passive markers flip the direction inside one endpoint order.
        (
            {"name": "提供贷款", "description": "甲向乙提供贷款。"},
            {"name": "获得贷款", "description": "甲从乙获得贷款。"},
            "direction",
        ),
        (
            {"name": "培养", "description": "甲培养了乙。"},
            {"name": "受培养", "description": "甲受乙培养。"},
            "direction",
        ),
        (
            {"name": "任命", "description": "甲任命乙。"},
            {"name": "被任命", "description": "甲被乙任命。"},
            "direction",
        ),
        (
            {"name": "appointed", "description": "A appointed B."},
            {"name": "was appointed by", "description": "A was appointed by B."},
            "direction",
        ),
        (
            {"name": "a donné", "description": "A a donné le domaine à B."},
            {"name": "a reçu de", "description": "A a reçu le domaine de B."},
            "direction",
        ),
        # A state and an event with the same number are two facts.
        (
            {"name": "owns", "description": "Owns 60% of the firm."},
            {"name": "bought", "description": "Bought 60% of the firm in 2019."},
            "event_state",
        ),
        (
            {"name": "holds", "description": "Holds 12% of the shares."},
            {"name": "cut its stake", "description": "Cut its stake to 12%."},
            "event_state",
        ),
        (
            {"name": "持有", "description": "持有该公司30%的股份。"},
            {"name": "收购", "description": "2018年收购该公司30%的股份。"},
            "event_state",
        ),
        # Names of different known kinds of relation.
        (
            {"name": "sponsor of", "description": "A sponsors B."},
            {"name": "sued", "description": "A sued B."},
            "predicate",
        ),
        (
            {"name": "fiancé of", "description": "A is engaged to B."},
            {"name": "divorced from", "description": "A divorced B."},
            "predicate",
        ),
        (
            {"name": "资助", "description": "甲资助乙。"},
            {"name": "起诉", "description": "甲起诉乙。"},
            "predicate",
        ),
        (
            {"name": "mentor of", "description": "A mentors B."},
            {"name": "rival of", "description": "A is B's rival."},
            "role",
        ),
        (
            {"name": "ally in the quest", "description": "They are allies."},
            {"name": "companion and fellow traveler", "description": "They travel together."},
            "predicate",
        ),  # one bond for some pairs, two aspects for others: the LLM decides
    ],
)
def test_guards_for_kinds_of_failure_seen_on_other_data(
    a: dict[str, str], b: dict[str, str], guard: str
) -> None:
    assert guard in guards(a, b)


@pytest.mark.parametrize(
    ("a", "b", "substitutes"),
    [
        ("停用二甲双胍以避免低血糖", "需要停用二甲双胍以避免乳酸酸中毒", True),
        ("以避免高血糖", "以避免低血糖", True),
        ("ada leads the firm", "ada heads the firm", True),
        ("a 20% stake", "a 20% stake bought in 2011", False),  # a detail added
        ("术前需停用该药", "需要停用该药", False),  # words added and left out, none replaced
        ("the same text.", "the same text", False),
    ],
)
def test_substituted_words_are_not_the_same_text(a: str, b: str, substitutes: bool) -> None:
    assert substituted(a, b) is substitutes
