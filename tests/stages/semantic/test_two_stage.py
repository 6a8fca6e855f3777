"""The two-stage embedding: the same relations, mapping and questions as the full model
everywhere, for a fraction of the full model's texts."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from relmerge import DeduplicateRelationsConfig
from relmerge.decide.vector_need import VectorNeed
from relmerge.engines.local import LocalEngine
from relmerge.providers.base import LanguageModel, NoLanguageModel
from relmerge.providers.embedding import CachedEmbedder
from relmerge.providers.use_embed import UseEmbedder
from relmerge.run.result import RunOutput
from relmerge.stages.semantic.text import UnitVectors
from relmerge.stages.semantic.two_stage import Split, settle
from relmerge.stores.memory import MemoryStore
from tests.support.dev_cli import DEV
from tests.support.engines import dev_engine_run
from tests.support.gold_judge import dev_gold_judge

pytestmark = pytest.mark.skipif(not DEV.is_dir(), reason="needs ../shared/data/dev")


async def _run(llm: LanguageModel, two_stage: bool) -> tuple[RunOutput, MemoryStore]:
    config = DeduplicateRelationsConfig(two_stage_embedding=two_stage)
    embedder = CachedEmbedder(UseEmbedder(processes=1))
    return await dev_engine_run(llm, LocalEngine(), config, embedder)


def _relations(store: MemoryStore) -> dict[str, bytes]:
    return {k: v for k, v in store.objects.items() if k.startswith("deduplicated_relations/")}


def _verdicts(store: MemoryStore) -> list[tuple[str, str, str]]:
    """Each decision's pair, verdict and tier (the cosine it shows may differ)."""
    lines = store.objects.get("decisions.jsonl", b"").splitlines()
    decisions = [orjson.loads(line) for line in lines if line.strip()]
    assert decisions
    return sorted((",".join(sorted(d["member_ids"])), d["verdict"], d["tier"]) for d in decisions)


@pytest.mark.parametrize("judge", [False, True], ids=["rules only", "gold judge"])
async def test_two_stage_decides_as_the_full_model_does(judge: bool) -> None:
    def llm() -> LanguageModel:
        return dev_gold_judge(DEV) if judge else NoLanguageModel()

    (full, full_store), (split, split_store) = [await _run(llm(), two) for two in (False, True)]
    assert _relations(split_store) == _relations(full_store)
    assert split.relation_id_mapping == full.relation_id_mapping
    assert _verdicts(split_store) == _verdicts(full_store)
    for key in ("llm_requests", "decisions_by_tier", "output_relation_count"):
        assert split.result[key] == full.result[key]
    by = split.result["engine"]["texts_embedded_by"]
    assert by["first_stage"] > 0 and by["full_model_for_rules"] > 0
    assert by["pairs_settled_by_first_stage"] > 0
    everything = full.result["engine"]["texts_embedded_by"]["full_model_for_rules"]
    assert by["full_model_for_rules"] + by["full_model_for_report"] < everything


def _vectors(rows: list[list[float]]) -> UnitVectors:
    matrix = np.asarray(rows, dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return UnitVectors(matrix, np.arange(len(rows), dtype=np.intp))


def test_a_pending_block_is_settled_only_when_every_pair_clears_the_threshold() -> None:
    config = DeduplicateRelationsConfig()  # band 0.5, first stage 0.7
    need = VectorNeed(frozenset({0, 1}), ((0, 1, "full"),))
    split = Split(
        full=[False] * 4, first=[True] * 4, for_rules=[False] * 4,
        pending=[([0, 1], need), ([2, 3], need)],
    )  # fmt: skip
    # Units 0 and 1 (first block) point the same way; 2 and 3 are apart.
    descriptions = _vectors([[1, 0, 0], [1, 0.1, 0], [1, 0, 0], [0, 1, 0]])
    names = _vectors([[0, 0, 1]] * 4)
    assert settle(split, descriptions, names, config) == 1
    assert split.full == [False, False, True, True] and split.for_rules == split.full
    off = DeduplicateRelationsConfig(first_stage_merge_cosine=None)
    split.pending = [([0, 1], need)]
    split.full = [False] * 4
    assert settle(split, descriptions, names, off) == 0 and split.full[:2] == [True, True]
