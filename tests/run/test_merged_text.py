"""An exact-key group gets the same merged text whichever stage decides it."""

from __future__ import annotations

from collections import Counter

import orjson
import pytest

from relmerge.eval.gold import load_gold
from relmerge.eval.gold_judge import GoldJudge
from relmerge.normalize import normalize_key_text
from relmerge.providers.embedding import HashEmbedder
from tests.factories import run_step
from tests.support.dev_cli import DEV

pytestmark = pytest.mark.skipif(not DEV.is_dir(), reason="needs ../shared/data/dev")


def _exact_key(record: dict[str, object], mapping: dict[str, str]) -> tuple[object, ...]:
    return (
        mapping.get(str(record["source_entity_id"]), record["source_entity_id"]),
        mapping.get(str(record["target_entity_id"]), record["target_entity_id"]),
        normalize_key_text(str(record["name"])),
        normalize_key_text(str(record["type"])),
    )


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
            GoldJudge(gold),
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
