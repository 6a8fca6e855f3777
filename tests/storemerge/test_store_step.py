"""``MergeIntoStore``: the store merge as a build step over a context (both backends)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from relmerge import DeduplicateRelationsConfig, DictContext
from relmerge.errors import InputError
from relmerge.graphstore import open_graph_store
from relmerge.providers.embedding import HashEmbedder
from relmerge.run.store_step import MergeIntoStore
from relmerge.stores import LocalStore
from tests.factories import record
from tests.storemerge.batches import FOUNDED


async def _build(root: Path, url: Any, records: list[dict[str, Any]]) -> tuple[Any, DictContext]:
    objects = LocalStore(root)
    keys = []
    for item in records:
        key = f"relations/{item['relation_id']}.json"
        await objects.put(key, orjson.dumps(item))
        keys.append(key)
    context = DictContext(
        {
            "stores.objects": objects,
            "stores.relations": url,
            "models.language": None,
            "models.embedding": HashEmbedder(),
        },
        {"relation_keys": keys, "entity_id_mapping": {}},
    )
    output = await MergeIntoStore(DeduplicateRelationsConfig()).run(context)
    return output, context


def test_two_builds_merge_into_one_store_and_keep_the_stored_id(
    store_url: str, tmp_path: Path
) -> None:
    asyncio.run(_init(store_url))
    first, _ = asyncio.run(_build(tmp_path / "b1", store_url, [record("a", description=FOUNDED)]))
    assert first.merge.mapping == {"a": "a"}
    _, context = asyncio.run(
        _build(
            tmp_path / "b2",
            store_url,
            [record("b", description=FOUNDED), record("c", source_entity_id="z")],
        )
    )
    assert context.get_artifact("relation_id_mapping") == {"b": "a", "c": "c"}
    keys = context.get_artifact("deduplicated_relation_keys")
    assert keys == ["deduplicated_relations/a.json", "deduplicated_relations/c.json"]
    written = orjson.loads((tmp_path / "b2" / keys[0]).read_bytes())
    assert written["source_chunk_ids"] == ["chunk_a", "chunk_b"]  # as stored now
    result = context.get_artifact("deduplicate_relations_result")
    assert result["status"] == "applied" and result["joined_count"] == 1
    assert all((tmp_path / "b2" / key).exists() for key in result["log_keys"])
    again, _ = asyncio.run(
        _build(
            tmp_path / "b2",
            store_url,
            [record("b", description=FOUNDED), record("c", source_entity_id="z")],
        )
    )
    assert again.merge.result.status == "already_applied"
    assert sorted(asyncio.run(_ids(store_url))) == ["a", "c"]


async def _init(url: str) -> None:
    async with open_graph_store(url) as store:
        await store.init()


async def _ids(url: str) -> list[str]:
    async with open_graph_store(url) as store:
        return [r.relation_id async for r in store.dump()]


def test_an_open_store_is_used_as_given_and_a_missing_one_is_a_clear_error(
    tmp_path: Path,
) -> None:
    async def go() -> Any:
        async with open_graph_store(f"sqlite:///{tmp_path / 'g.db'}") as store:
            await store.init()
            output, _ = await _build(tmp_path / "b", store, [record("a")])
            assert await store.relations_by_id(["a"])  # still open: the step left it so
            return output

    assert asyncio.run(go()).merge.mapping == {"a": "a"}
    with pytest.raises(InputError, match=r"stores\.relations"):
        asyncio.run(_build(tmp_path / "c", None, [record("a")]))
