"""The store-merge step in a heta-framework recipe: two builds, each a batch, merged into
one relation store (a named store component, or a URL in the config) with heta's model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from heta_framework.common.stores.object import LocalObjectStore
from heta_framework.kb.builder import KnowledgeBaseBuilder
from heta_framework.kb.components import KnowledgeModels, KnowledgeStores
from heta_framework.kb.recipe import KnowledgeRecipe
from heta_framework.kb.steps import KnowledgeStepProtocol
from heta_framework.kb.validation import RecipeValidationError

from relmerge.graphstore import open_graph_store
from relmerge.integrations.heta import MergeIntoStore, MergeIntoStoreConfig, MergeIntoStoreResult
from tests.integrations.heta.data import ENTITY_MAPPING, GOLD, RECORDS, partition
from tests.integrations.heta.support import HetaProtocolModel, put_relations

LLM_DECIDES: dict[str, Any] = {"auto_merge_cosine": None}


async def _build(
    step: MergeIntoStore, root: Path, records: list[dict[str, Any]], named: dict[str, Any]
) -> Any:
    store = LocalObjectStore(root)
    keys = await put_relations(store, records)
    recipe = KnowledgeRecipe(
        models=KnowledgeModels(language=HetaProtocolModel(GOLD, RECORDS)),
        stores=KnowledgeStores(objects=store, named=named),
        steps=(step,),
    )
    return await KnowledgeBaseBuilder().build(
        recipe, initial_artifacts={"relation_keys": keys, "entity_id_mapping": ENTITY_MAPPING}
    )


async def _stored(url: str) -> list[str]:
    async with open_graph_store(url) as store:
        return [r.relation_id async for r in store.dump()]


async def test_two_builds_merge_into_one_store_as_one_build_would(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'graph.db'}"
    async with open_graph_store(url) as store:
        await store.init()
    step = MergeIntoStore(MergeIntoStoreConfig(semantic_merge=False, **LLM_DECIDES))
    assert isinstance(step, KnowledgeStepProtocol)
    half = len(RECORDS) // 2
    mapping: dict[str, str] = {}
    for number, part in enumerate((RECORDS[:half], RECORDS[half:])):
        result = await _build(step, tmp_path / f"b{number}", part, {"relations": url})
        assert result.record.status == "succeeded", result.record.step_records[-1].error
        outcome = result.artifacts["deduplicate_relations_result"]
        assert isinstance(outcome, MergeIntoStoreResult) and outcome.status == "applied"
        assert outcome.issues == () and result.issues == ()
        mapping.update(result.artifacts["relation_id_mapping"])
        for key in result.artifacts["deduplicated_relation_keys"]:
            assert (tmp_path / f"b{number}" / key).exists()
    assert set(mapping) == set(GOLD)  # every input id, each once
    assert set(mapping.values()) == set(await _stored(url))
    whole = MergeIntoStore(MergeIntoStoreConfig(semantic_merge=False, **LLM_DECIDES))
    other = f"sqlite:///{tmp_path / 'whole.db'}"
    async with open_graph_store(other) as store:
        await store.init()
    one = await _build(whole, tmp_path / "whole", RECORDS, {"relations": other})
    assert partition(mapping) == partition(one.artifacts["relation_id_mapping"])


async def test_the_store_url_may_be_in_the_config_instead(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'graph.db'}"
    async with open_graph_store(url) as store:
        await store.init()
    config = MergeIntoStoreConfig(semantic_merge=False, relation_store_url=url, **LLM_DECIDES)
    step = MergeIntoStore(config)
    assert "stores.relations" not in {ref.key for ref in step.requirements.components}
    result = await _build(step, tmp_path / "b", RECORDS, {})
    assert result.record.status == "succeeded", result.record.step_records[-1].error
    assert set(result.artifacts["relation_id_mapping"]) == set(GOLD)
    assert await _stored(url)


def test_a_recipe_without_the_store_component_is_refused_naming_it(tmp_path: Path) -> None:
    step = MergeIntoStore(MergeIntoStoreConfig(semantic_merge=False))
    with pytest.raises(RecipeValidationError, match=r"stores\.relations\.relations"):
        asyncio.run(_build(step, tmp_path / "b", RECORDS[:2], {}))
