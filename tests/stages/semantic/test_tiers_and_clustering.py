from __future__ import annotations

import pytest

from relmerge import DeduplicateRelationsConfig
from relmerge.model import ExtractedRelation
from relmerge.stages.semantic.clustering import ConstrainedClusters
from relmerge.stages.semantic.features import relation_features
from relmerge.stages.semantic.lexicon import load_lexicon
from relmerge.stages.semantic.tiers import decide_pair
from tests.factories import record

CONFIG = DeduplicateRelationsConfig()


def features(**fields: str):
    return relation_features(
        ExtractedRelation.model_validate(record("r", **fields)), load_lexicon()
    )


PLAIN = features(name="leads", description="Ada leads the firm.")
SYMMETRIC = features(name="married to", description="They married.")


@pytest.mark.parametrize(
    ("fuzzy", "cosine", "name_cosine", "verdict", "tier"),
    [
        (95, 0.2, 0.1, "merge", "fuzzy_high"),
        (50, 0.9, 0.1, "merge", "embedding_high"),
        (10, 0.5, 0.7, "merge", "embedding_high"),  # same predicate, other language
        (10, 0.2, 0.1, "keep", "fuzzy_low"),
        (0, 0.7, 0.3, "undecided", "band"),  # cross-language: fuzzy alone never keeps apart
        (60, 0.5, 0.3, "undecided", "band"),
    ],
)
def test_bands(fuzzy: float, cosine: float, name_cosine: float, verdict: str, tier: str) -> None:
    decision = decide_pair(0, 1, (PLAIN, PLAIN), True, fuzzy, cosine, name_cosine, CONFIG)
    assert (decision.verdict, decision.tier) == (verdict, tier)


def test_the_same_specific_numbers_merge_across_languages() -> None:
    a = features(name="holds stake in", description="A 20% stake bought in 2011.")
    b = features(name="持股", description="2011年入股，持股比例为百分之二十。")
    decision = decide_pair(0, 1, (a, b), True, 5, 0.6, 0.3, CONFIG)
    assert (decision.verdict, decision.tier) == ("merge", "detail_match")
    c = features(name="持股", description="持股比例为百分之二十。")  # fewer numbers: no rule
    assert decide_pair(0, 1, (a, c), True, 5, 0.6, 0.3, CONFIG).verdict == "undecided"


def test_reversed_non_symmetric_is_a_hard_keep_whatever_the_scores() -> None:
    decision = decide_pair(0, 1, (PLAIN, PLAIN), False, 100, 1.0, 1.0, CONFIG)
    assert (decision.verdict, decision.tier, decision.hard) == ("keep", "direction", True)


def test_reversed_symmetric_is_scored_like_any_pair() -> None:
    decision = decide_pair(0, 1, (SYMMETRIC, SYMMETRIC), False, 100, 1.0, 1.0, CONFIG)
    assert decision.verdict == "merge"


def test_a_guard_beats_a_high_score() -> None:
    a = features(name="holds stake in", description="A 20% stake.")
    b = features(name="holds stake in", description="A 35% stake.")
    decision = decide_pair(0, 1, (a, b), True, 97, 0.99, 1.0, CONFIG)
    assert (decision.verdict, decision.tier, decision.guards) == (
        "undecided",
        "guard",
        ("numbers",),
    )


def test_known_distinct_is_a_hard_keep() -> None:
    decision = decide_pair(0, 1, (PLAIN, PLAIN), True, 100, 1.0, 1.0, CONFIG, known_distinct=True)
    assert decision.hard and decision.verdict == "keep"


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
    from relmerge.errors import ConfigError

    with pytest.raises(ConfigError, match="auto_keep_cosine"):
        DeduplicateRelationsConfig(auto_keep_cosine=0.95, similarity_threshold=0.9)
    with pytest.raises(ConfigError, match="auto_keep_fuzzy"):
        DeduplicateRelationsConfig(auto_keep_fuzzy=95, auto_merge_fuzzy=90)


@pytest.mark.parametrize("name", ["related", "Related to", "关联", "lié à"])
def test_a_generic_name_is_no_evidence_for_the_name_cosine_rule(name: str) -> None:
    """GraphRAG and LightRAG relations carry no name ("related" everywhere): equal names
    must not merge two facts whose texts are only loosely alike."""
    lexicon = load_lexicon()
    a = ExtractedRelation(**record("a", name=name, description="Scrooge employs Bob."))
    b = ExtractedRelation(**record("b", name=name, description="Scrooge visits Bob's home."))
    features = (relation_features(a, lexicon), relation_features(b, lexicon))
    assert features[0].generic_name and features[1].generic_name
    config = DeduplicateRelationsConfig()
    decision = decide_pair(0, 1, features, True, 50.0, 0.6, 1.0, config)
    assert decision.verdict == "undecided"
    specific = [
        relation_features(ExtractedRelation(**record(i, name="employs", description=d)), lexicon)
        for i, d in (("a", "Scrooge employs Bob."), ("b", "Scrooge pays Bob a wage."))
    ]
    merged = decide_pair(0, 1, (specific[0], specific[1]), True, 50.0, 0.6, 1.0, config)
    assert merged.verdict == "merge"


def test_a_generic_name_is_left_out_of_the_embedded_text() -> None:
    from relmerge.stages.semantic.text import embedding_text

    generic = ExtractedRelation(**record("a", name="related", description="Bob works for him."))
    specific = ExtractedRelation(**record("b", name="employs", description="Bob works for him."))
    assert embedding_text(generic, 300) == "Bob works for him."
    assert embedding_text(specific, 300) == "employs: Bob works for him."
