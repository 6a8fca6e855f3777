"""The SQLite cache and the wrappers that read and fill it."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from relmerge.cache import CachedAnswer, RunCache, answer_key
from relmerge.errors import StoreError
from relmerge.providers.base import LLMRequest, Message
from relmerge.providers.cached import CachingModel, PersistentEmbedder, model_identity
from relmerge.providers.embedding import HashEmbedder, Vectors
from relmerge.providers.fake import ScriptedLLM
from relmerge.providers.limits import BudgetModel, RateLimitedModel
from relmerge.providers.openai_compat import OpenAICompatibleModel


def _request(text: str = "records", *, task: str = "relation_merge", t: float = 0.0) -> LLMRequest:
    return LLMRequest(
        task=task,
        messages=(Message("system", "rules"), Message("user", text)),
        schema={"type": "object"},
        temperature=t,
    )


def test_answers_survive_a_new_connection(tmp_path: Path) -> None:
    path = tmp_path / "c" / "cache.sqlite"
    cache = RunCache(path)
    cache.put_answer("k1", CachedAnswer('{"a": 1}', "m", 10, 3))
    cache.close()
    again = RunCache(path)
    assert again.answer("k1") == CachedAnswer('{"a": 1}', "m", 10, 3)
    assert again.answer("k2") is None
    assert again.counts() == {"llm_answers": 1, "embeddings": 0}


def test_nothing_is_created_before_first_use(tmp_path: Path) -> None:
    RunCache(tmp_path / "out" / "cache.sqlite").close()
    assert not (tmp_path / "out").exists()


def test_a_corrupt_file_is_a_clear_store_error(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="cache"):
        RunCache(path).answer("k")


@pytest.mark.parametrize(
    "changed",
    [
        _request("other records"),
        _request(task="relation_cluster"),
        _request(t=0.7),
        LLMRequest("relation_merge", (Message("user", "records"),), {"type": "array"}),
    ],
)
def test_the_key_covers_everything_that_determines_an_answer(changed: LLMRequest) -> None:
    from relmerge.providers.cached import request_identity

    identity = {"provider": "openai", "model": "m"}
    base = answer_key(identity, request_identity(_request()))
    assert base == answer_key(identity, request_identity(_request()))
    assert base != answer_key(identity, request_identity(changed))
    assert base != answer_key({"provider": "openai", "model": "n"}, request_identity(_request()))


def test_the_provider_identity_names_endpoint_model_and_format_but_not_the_key() -> None:
    model = OpenAICompatibleModel(
        base_url="http://127.0.0.1:9/v1", model="m", api_key="sk-secret", response_format="none"
    )
    identity = model_identity(BudgetModel(RateLimitedModel(model, 60), None, None))
    assert identity == {
        "provider": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "response_format": "none",
    }
    assert "sk-secret" not in str(identity)


async def test_a_repeated_request_is_answered_from_the_cache(tmp_path: Path) -> None:
    inner = ScriptedLLM(['{"relation": 1}', "second answer never used"])
    cache = RunCache(tmp_path / "cache.sqlite")
    first = await CachingModel(inner, cache).invoke(_request())
    # A new wrapper over the same file: the answer outlives the run that got it.
    second = await CachingModel(inner, RunCache(tmp_path / "cache.sqlite")).invoke(_request())
    assert len(inner.requests) == 1
    assert not first.cached and second.cached
    assert second.text == first.text and second.parsed == {"relation": 1}
    assert second.usage == first.usage and second.attempts == 0


async def test_invalid_answers_are_replayed_too(tmp_path: Path) -> None:
    """A re-run replays the same conversation, retries included, to reach the same end."""
    inner = ScriptedLLM(["not json", '{"ok": true}'])
    model = CachingModel(inner, RunCache(tmp_path / "cache.sqlite"))
    assert (await model.invoke(_request("a"))).parsed is None
    assert (await model.invoke(_request("b"))).parsed == {"ok": True}
    replay = CachingModel(ScriptedLLM([]), RunCache(tmp_path / "cache.sqlite"))
    assert (await replay.invoke(_request("a"))).text == "not json"
    assert (await replay.invoke(_request("b"))).parsed == {"ok": True}


class CountingEmbedder:
    def __init__(self) -> None:
        self.inner = HashEmbedder()
        self.name = "hash"
        self.cache_identity = "hash:512"
        self.seen: list[str] = []

    async def embed(self, texts: Sequence[str]) -> Vectors:
        self.seen.extend(texts)
        return await self.inner.embed(texts)


async def test_stored_vectors_are_bit_identical_and_never_recomputed(tmp_path: Path) -> None:
    texts = ["ally of", "敌人", "ally of", "friend of"]
    first_inner = CountingEmbedder()
    first = await PersistentEmbedder(first_inner, RunCache(tmp_path / "c.sqlite")).embed(texts)
    second_inner = CountingEmbedder()
    second = PersistentEmbedder(second_inner, RunCache(tmp_path / "c.sqlite"))
    vectors = await second.embed([*texts, "new text"])
    assert second_inner.seen == ["new text"]
    assert np.array_equal(vectors[:4], first)
    assert np.array_equal(vectors[4], (await HashEmbedder().embed(["new text"]))[0])
    assert vectors.dtype == np.float32


async def test_embedders_with_other_identities_do_not_share_vectors(tmp_path: Path) -> None:
    cache = RunCache(tmp_path / "c.sqlite")
    await PersistentEmbedder(CountingEmbedder(), cache).embed(["x"])
    other = CountingEmbedder()
    other.cache_identity = "hash:256"
    await PersistentEmbedder(other, cache).embed(["x"])
    assert other.seen == ["x"]


def test_two_processes_can_share_one_file(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    RunCache(path).put_answer("a", CachedAnswer("1", "m", 0, 0))
    other = sqlite3.connect(path)
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    other.close()
    assert RunCache(path).answer("a") is not None


async def test_the_step_with_a_cache_asks_nothing_the_second_time(tmp_path: Path) -> None:
    from relmerge import DeduplicateRelations, DeduplicateRelationsConfig, DictContext
    from relmerge.providers.fake import merge_all
    from tests.factories import record, store_with

    records = [record(f"r{i}", description=f"Text {i % 3}.") for i in range(6)]
    runs = []
    for _ in range(2):
        llm = ScriptedLLM(merge_all)
        store, keys = store_with(records)
        step = DeduplicateRelations(
            DeduplicateRelationsConfig(semantic_merge=True),
            cache=RunCache(tmp_path / "cache.sqlite"),
        )
        context = DictContext(
            components={
                "stores.objects": store,
                "models.language": llm,
                "models.embedding": HashEmbedder(),
            },
            artifacts={"relation_keys": keys, "entity_id_mapping": {}},
        )
        output = await step.run(context)
        runs.append((len(llm.requests), output, store.objects))
    (sent, first, first_files), (resent, second, second_files) = runs
    assert sent > 0 and resent == 0
    assert second.result["llm_cache_hits"] == sent
    assert second.relation_id_mapping == first.relation_id_mapping
    assert {k: v for k, v in second_files.items() if k.startswith("deduplicated_")} == {
        k: v for k, v in first_files.items() if k.startswith("deduplicated_")
    }


async def test_a_run_is_served_only_the_vectors_stored_before_it_began(tmp_path: Path) -> None:
    """A text another chunk of this run embedded is embedded again (its vector would
    depend on which chunk finished first); what earlier runs stored is served."""
    cache = RunCache(tmp_path / "c.sqlite")
    inner = CountingEmbedder()
    embedder = PersistentEmbedder(inner, cache)
    embedder.begin_run()
    await embedder.embed(["x", "y"])
    await embedder.embed(["x", "z"])
    embedder.store([("w", np.ones(512, np.float32).tobytes())])
    assert inner.seen == ["x", "y", "x", "z"]
    assert embedder.stored(["x", "w", "z"]) == {}

    embedder.begin_run()  # the next run
    await embedder.embed(["x", "y", "z"])
    assert inner.seen == ["x", "y", "x", "z"]
    assert sorted(embedder.stored(["x", "w", "q"])) == [0, 1]
