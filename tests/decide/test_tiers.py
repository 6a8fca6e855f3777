"""One pair's tier verdict: evidence-only automatic merges, hard keeps, the LLM for the rest."""

from __future__ import annotations

import pytest

from relmerge import DeduplicateRelationsConfig
from relmerge.decide.clustering import ConstrainedClusters
from relmerge.decide.features import RelationFeatures, relation_features
from relmerge.decide.lexicon import load_lexicon
from relmerge.decide.scores import PairScores, pair_mode
from relmerge.decide.tiers import Orientation, decide_pair
from relmerge.errors import ConfigError
from relmerge.model import ExtractedRelation
from tests.factories import record

CONFIG = DeduplicateRelationsConfig()
LEX = load_lexicon()


def features(name: str, description: str, shared: frozenset[str] = frozenset()):
    relation = ExtractedRelation.model_validate(record("r", name=name, description=description))
    return relation_features(relation, LEX, shared)


def verdict(
    a: RelationFeatures,
    b: RelationFeatures,
    fuzzy: float,
    cosine: float,
    orientation: Orientation = "same",
    config: DeduplicateRelationsConfig = CONFIG,
    known: bool = False,
) -> tuple[str, str]:
    scores = PairScores(pair_mode(a, b), fuzzy, cosine, 0.0)
    decision = decide_pair(0, 1, (a, b), orientation, scores, config, known)
    return decision.verdict, decision.tier


CAPITAL = features("capital of", "The city is the provincial capital.")
CAPITAL_ZH = features("省会", "该市是该省的省会。")
PLAIN_A = features("looks after", "A looks after B.")
PLAIN_B = features("takes care of", "A takes care of B.")
MARRIED = features("married to", "They married.")
SPOUSE = features("married to", "They married in spring.")
COUSIN = features("表亲", "两人是表亲。")


def test_near_identical_wording_merges() -> None:
    a, b = (
        features("looks after", "A looks after B."),
        features("looks after", "A looks after B daily."),
    )
    assert verdict(a, b, 95, 0.2) == ("merge", "fuzzy_high")


def test_the_same_known_kind_of_relation_merges_at_the_cosine_band() -> None:
    band = CONFIG.auto_merge_cosine
    assert band is not None
    assert verdict(CAPITAL, CAPITAL_ZH, 5, band) == ("merge", "embedding_high")
    assert verdict(CAPITAL, CAPITAL_ZH, 5, band - 0.01) == ("undecided", "band")


def test_unknown_names_are_no_evidence_whatever_the_cosine() -> None:
    """Two names nobody knows the meaning of never merge on their cosine (a names'
    cosine of 0.6 is no evidence of one meaning); the LLM decides."""
    assert verdict(PLAIN_A, PLAIN_B, 60, 0.99) == ("undecided", "band")


def test_shared_and_generic_names_are_judged_on_descriptions_without_a_cosine_band() -> None:
    a, b = features("related", "Scene one."), features("related", "Scene two.")
    assert pair_mode(a, b) == "description"
    assert verdict(a, b, 60, 0.99) == ("undecided", "band")
    same = features("kw one, kw two", "x"), features("kw one, kw two", "y")
    assert pair_mode(*same) == "description"
    shared = frozenset({"holds"})
    batch_wide = features("holds", "x", shared), features("holds", "y", shared)
    assert batch_wide[0].shared_name and pair_mode(*batch_wide) == "description"
    assert batch_wide[0].symmetry == "directed"  # what a shared name says of direction holds


def test_reversed_known_directed_is_a_hard_keep_whatever_the_scores() -> None:
    decision = decide_pair(
        0, 1, (CAPITAL, CAPITAL_ZH), "reversed", PairScores("full", 100, 1.0, 1.0), CONFIG
    )
    assert (decision.verdict, decision.tier, decision.hard) == ("keep", "direction", True)


def test_reversed_symmetric_is_scored_like_any_pair() -> None:
    assert verdict(MARRIED, SPOUSE, 95, 1.0, "reversed") == ("merge", "fuzzy_high")


def test_reversed_of_unknown_symmetry_goes_to_the_llm_unbound() -> None:
    decision = decide_pair(
        0, 1, (COUSIN, COUSIN), "reversed", PairScores("description", 100, 1.0, 1.0), CONFIG
    )
    assert (decision.verdict, decision.tier, decision.hard) == (
        "undecided",
        "direction_unknown",
        False,
    )


def test_other_endpoints_and_earlier_splits_are_hard_keeps() -> None:
    assert verdict(PLAIN_A, PLAIN_A, 100, 1.0, "other") == ("keep", "endpoints")
    assert verdict(PLAIN_A, PLAIN_B, 100, 1.0, known=True) == ("keep", "known_distinct")


def test_a_guard_beats_a_high_score() -> None:
    a = features("holds stake in", "A 20% stake.")
    b = features("holds stake in", "A 35% stake.")
    decision = decide_pair(0, 1, (a, b), "same", PairScores("description", 97, 0.99, 1), CONFIG)
    assert (decision.verdict, decision.tier, decision.guards) == (
        "undecided",
        "guard",
        ("numbers",),
    )


def test_a_substituted_word_is_not_near_identical_wording() -> None:
    a = features("related", "停用该药以避免低血糖")
    b = features("related", "停用该药以避免高血糖")
    assert verdict(a, b, 95, 0.99) == ("undecided", "guard")


def test_a_keep_band_keeps_only_when_set() -> None:
    keep = DeduplicateRelationsConfig(auto_keep_cosine=0.3)
    assert verdict(PLAIN_A, PLAIN_B, 10, 0.2, config=keep) == ("keep", "fuzzy_low")
    assert verdict(PLAIN_A, PLAIN_B, 10, 0.2) == ("undecided", "band")  # default: off
    # Cross-language duplicates have fuzzy ≈ 0: fuzzy alone never keeps them apart.
    assert verdict(PLAIN_A, PLAIN_B, 0, 0.5, config=keep) == ("undecided", "band")


def test_chaining_guard_refuses_to_join_across_a_keep() -> None:
    clusters = ConstrainedClusters(3)
    clusters.forbid(0, 2)  # A and C judged distinct
    assert clusters.join(0, 1)  # A ~ B
    assert not clusters.join(1, 2)  # B ~ C would put A with C
    assert clusters.clusters() == [[0, 1], [2]]


def test_join_all_reports_the_members_it_could_not_join() -> None:
    clusters = ConstrainedClusters(4)
    clusters.forbid(0, 3)
    assert clusters.join_all([0, 1, 2, 3]) == [3]
    assert clusters.clusters() == [[0, 1, 2], [3]]


def test_band_settings_are_validated_together() -> None:
    with pytest.raises(ConfigError, match="auto_keep_cosine"):
        DeduplicateRelationsConfig(auto_keep_cosine=0.95, similarity_threshold=0.9)
    with pytest.raises(ConfigError, match="auto_keep_fuzzy"):
        DeduplicateRelationsConfig(auto_keep_fuzzy=95, auto_merge_fuzzy=90)


@pytest.mark.parametrize(
    ("removed", "replacement"),
    [
        ("auto_merge_name_cosine", "auto_merge_cosine"),
        ("auto_merge_min_cosine", "auto_merge_cosine"),
        ("auto_merge_detail_cosine", "auto_merge_cosine"),
    ],
)
def test_a_removed_threshold_names_its_replacement(removed: str, replacement: str) -> None:
    with pytest.raises(ConfigError, match=rf"{removed}: removed.*{replacement}"):
        DeduplicateRelationsConfig(**{removed: 0.6})


def test_a_band_is_turned_off_with_off() -> None:
    assert DeduplicateRelationsConfig(auto_merge_cosine="off").auto_merge_cosine is None
