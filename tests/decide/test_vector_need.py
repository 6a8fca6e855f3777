"""A pair's verdict reads its cosine exactly where ``vector_need`` says it does."""

from __future__ import annotations

from itertools import combinations

import pytest

from relmerge import DeduplicateRelationsConfig
from relmerge.decide.features import relation_features
from relmerge.decide.job import orientation
from relmerge.decide.lexicon import lexicon_for
from relmerge.decide.scores import BlockFuzzy, PairScores
from relmerge.decide.tiers import decide_pair
from relmerge.decide.vector_need import vector_need
from relmerge.io.load import read_entity_mapping
from relmerge.model import ExtractedRelation
from relmerge.stages.remap import remap_relation
from tests.support.dev_cli import DEV

pytestmark = pytest.mark.skipif(not DEV.is_dir(), reason="needs ../shared/data/dev")

CONFIGS = {
    "shipped": DeduplicateRelationsConfig(),
    "every band on": DeduplicateRelationsConfig(
        auto_merge_cosine=0.7,
        auto_keep_cosine=0.2,
        auto_merge_description_cosine=0.8,
        auto_keep_description_cosine=0.1,
    ),
}


def _dev_blocks() -> list[list[ExtractedRelation]]:
    mapping = read_entity_mapping(DEV / "entity_id_mapping.json")
    blocks: dict[frozenset[str], list[ExtractedRelation]] = {}
    for line in (DEV / "relations.jsonl").read_text(encoding="utf-8").splitlines():
        relation, _ = remap_relation(ExtractedRelation.model_validate_json(line), mapping)
        key = frozenset((relation.source_entity_id, relation.target_entity_id))
        blocks.setdefault(key, []).append(relation)
    return [block for block in blocks.values() if len(block) > 1]


@pytest.mark.parametrize("name", CONFIGS)
def test_a_pair_outside_the_need_gets_one_verdict_whatever_its_cosine(name: str) -> None:
    config = CONFIGS[name]
    lexicon = lexicon_for(config)
    checked = needed = 0
    for block in _dev_blocks():
        features = [relation_features(r, lexicon, frozenset()) for r in block]
        fuzzy = BlockFuzzy(features)
        need = vector_need(block, features, fuzzy, config).rows
        for a, b in combinations(range(len(block)), 2):
            verdicts = {
                (d.verdict, d.tier)
                for cosine in (-1.0, -0.3, 0.0, 0.25, 0.5, 0.75, 0.9, 1.0)
                for d in [
                    decide_pair(
                        a,
                        b,
                        (features[a], features[b]),
                        orientation(block[a], block[b]),
                        PairScores(fuzzy.mode(a, b), fuzzy.ratio(a, b), cosine, 0.0),
                        config,
                    )
                ]
            }
            checked += 1
            if len(verdicts) > 1:
                needed += 1
                assert {a, b} <= need, (block[a].relation_id, block[b].relation_id)
            elif not ({a, b} <= need):
                assert len(verdicts) == 1
    assert checked > 100 and 0 < needed < checked
