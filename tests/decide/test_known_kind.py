"""A name is of a known kind only if every word of it is explained; verbs of change and
voice markers are read as classes, wherever they stand in the name (issue 26)."""

from __future__ import annotations

import pytest

from relmerge import DeduplicateRelationsConfig
from relmerge.decide.features import RelationFeatures, relation_features
from relmerge.decide.guards import fired_guards
from relmerge.decide.lexicon import load_lexicon
from relmerge.decide.scores import PairScores
from relmerge.decide.tiers import decide_pair, same_known_kind
from relmerge.model import ExtractedRelation
from tests.factories import record

LEX = load_lexicon()
CONFIG = DeduplicateRelationsConfig()


def features(name: str, description: str = "") -> RelationFeatures:
    fields = {"name": name, "description": description or f"A {name} B."}
    return relation_features(ExtractedRelation.model_validate(record("r", **fields)), LEX)


def at_full_cosine(a: str, b: str) -> tuple[str, str]:
    """Verdict and tier of two names of one endpoint order, the cosine at its maximum
    and the wording far apart: only the known-kind band can merge them."""
    scores = PairScores("full", 10.0, 1.0, 1.0)
    decision = decide_pair(0, 1, (features(a), features(b)), "same", scores, CONFIG)
    return decision.verdict, decision.tier


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("capital of", "省会"),
        ("capital of", "capitale de"),
        ("is the capital of", "是省会"),  # function words and characters explain
        ("CEO of", "首席执行官"),
        ("PDG de", "chief executive officer"),
        ("隶属于", "fait partie de"),  # 隶属 + 于 by longest match
        ("holds 20% stake in", "持股"),  # a number is explained (the numbers guard reads it)
        ("détient 35 % de", "持股"),
        ("borders", "shares a border with"),
        ("acquired by", "was acquired by"),  # the same voice: its marker is explained
        ("serves as CEO of", "担任首席执行官"),  # a copula states the role, no other fact
    ],
)
def test_names_whose_every_word_is_explained_are_of_one_known_kind(a: str, b: str) -> None:
    assert same_known_kind(features(a), features(b))
    assert at_full_cosine(a, b) == ("merge", "embedding_high")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("increased its stake in", "stake in"),  # a verb of change
        ("minority shareholder of", "shareholder of"),  # a qualifier
        ("former CEO of", "CEO of"),
        ("曾隶属于", "隶属于"),  # 曾 (formerly): a character run left over
        ("包含行政区", "包含"),
        ("ally in the quest", "ally of"),
        ("a porté sa participation à", "détient une participation dans"),
        ("bought a stake in", "holds a stake in"),  # two kinds against one
        ("由刘洋接替", "接替"),  # an entity name and a marker inside the name
    ],
)
def test_a_word_the_vocabulary_cannot_explain_leaves_the_pair_to_the_llm(a: str, b: str) -> None:
    assert not same_known_kind(features(a), features(b))
    # With --llm none an undecided pair is kept apart and listed for review.
    assert at_full_cosine(a, b)[0] == "undecided"


def test_a_role_read_in_the_description_makes_no_known_kind() -> None:
    a = features("由刘洋接任", "张伟卸任首席执行官后，由刘洋接任。")
    b = features("接任", "张伟接任刘洋，出任首席执行官。")
    assert a.roles == b.roles == {"ceo"}  # the role guard still reads it
    assert not same_known_kind(a, b)


@pytest.mark.parametrize(
    ("name", "way"),
    [
        ("increased its stake in", "up"),
        ("raises its holding in", "up"),
        ("boosting its position in", "up"),
        ("topped up its stake in", "up"),
        ("bought shares of", "up"),
        ("acquires", "up"),
        ("took over", "up"),
        ("cut its stake in", "down"),
        ("trimmed its holding in", "down"),
        ("sold its shares in", "down"),
        ("divests", "down"),
        ("offloaded its stake in", "down"),
        ("pared back its stake in", "down"),
        ("a augmenté sa participation dans", "up"),
        ("renforce sa participation dans", "up"),
        ("acquiert", "up"),
        ("a racheté", "up"),
        ("a réduit sa participation dans", "down"),
        ("a cédé", "down"),
        ("cède ses parts de", "down"),
        ("vend", "down"),
        ("增持", "up"),
        ("加仓", "up"),
        ("增资", "up"),
        ("买入", "up"),
        ("减持", "down"),
        ("减仓", "down"),
        ("抛售", "down"),
        ("下调持股", "down"),
        ("transferred its stake to", "other"),
    ],
)
def test_verbs_of_change_are_a_class_with_their_inflections(name: str, way: str) -> None:
    found = features(name)
    assert found.change == {way}
    assert found.kind == "event"


@pytest.mark.parametrize("name", ["holds", "stake in", "持股", "détient", "owns", "plays for"])
def test_a_state_is_no_change(name: str) -> None:
    assert features(name).change == frozenset()


@pytest.mark.parametrize(
    ("event", "state"),
    [
        # The case: the same number in both, a change against a state.
        ("raised its stake to 35%", "holds 35%"),
        ("increased its stake in", "holds a stake in"),
        ("增持至35%", "持股35%"),
        ("加仓", "持有"),
        ("a augmenté sa participation à 35 %", "détient 35 %"),
        ("réduit sa participation à 10 %", "détient 10 %"),
    ],
)
def test_an_event_of_change_against_a_state_fires_the_event_guard(event: str, state: str) -> None:
    assert "event_state" in fired_guards(features(event), features(state))


@pytest.mark.parametrize(
    ("a", "b", "opposite"),
    [
        ("increased its stake in", "cut its stake in", True),
        ("加仓", "减仓", True),
        ("增资", "减资", True),
        ("a augmenté sa participation dans", "a réduit sa participation dans", True),
        ("bought shares of", "sold shares of", True),
        ("increased its stake in", "raised its stake in", False),
        ("增持", "加仓", False),
    ],
)
def test_a_change_up_against_a_change_down_is_an_opposite(a: str, b: str, opposite: bool) -> None:
    assert ("opposite" in fired_guards(features(a), features(b))) is opposite


def test_a_description_that_tells_of_a_change_does_not_make_a_generic_relation_an_event() -> None:
    # A medical note "lowers blood pressure" says what happens, not that the edge changes.
    a = features("related", "钙通道阻滞剂可能导致术中低血压。")
    b = features("related", "钙通道阻滞剂在术中可导致血压降低。")
    assert a.change == b.change == frozenset()
    assert "event_state" not in fired_guards(a, b)


@pytest.mark.parametrize(
    "name",
    [
        "由刘洋接任",
        "其职务后由刘洋接替",
        "被蓝海集团收购",
        "被蓝海集团以现金方式全资收购",
        "受董事会委托管理",
        "为蓝海集团所收购",
        "was later acquired by",
        "was eventually succeeded as chair by",
        "bought outright in 2015 by",
        "a été rachetée en 2015 par",
        "remplacée à la présidence par",
        "a été choisie comme successeure par",
    ],
)
def test_a_voice_marker_apart_from_its_verb_is_passive(name: str) -> None:
    assert features(name).passive


@pytest.mark.parametrize(
    "name",
    [
        "自由贸易伙伴",
        "由于合作",
        "side by side with",
        "one by one",
        "passe par la vallée de",
        "接任",
    ],
)
def test_words_that_only_look_like_a_marker_are_not_passive(name: str) -> None:
    assert not features(name).passive


@pytest.mark.parametrize(
    ("passive", "active"),
    [
        ("由刘洋接任", "接任"),
        ("被蓝海集团收购", "收购"),
        ("was later acquired by", "acquired"),
        ("a été rachetée en 2015 par", "a racheté"),
    ],
)
def test_the_direction_guard_fires_across_the_distance(passive: str, active: str) -> None:
    assert "direction" in fired_guards(features(passive), features(active))
