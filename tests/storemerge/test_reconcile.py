"""``relmerge reconcile`` on both backends: stored duplicates are proposed as one
survivor (the first stored) and absorbed ids, the store is left as it was."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from relmerge import DeduplicateRelationsConfig, ExtractedRelation
from relmerge.graphstore import open_graph_store
from relmerge.providers.embedding import HashEmbedder
from relmerge.run.reconcile import Reconcile
from tests.factories import record
from tests.storemerge.batches import FOUNDED
from tests.support.cli_process import relmerge


def stored(relation_id: str, description: str, **fields: Any) -> ExtractedRelation:
    return ExtractedRelation(**record(relation_id, description=description, **fields))


GRAPH = [
    stored("s1", FOUNDED),
    stored("s2", FOUNDED),  # the same fact, loaded as is (never deduplicated)
    stored("s3", "Alice sold Acme in 2001.", name="sold"),
    stored("s4", FOUNDED, source_entity_id="z"),  # another pair
]


async def _load(url: str) -> list[bytes]:
    async with open_graph_store(url) as store:
        await store.init()
        await store.load(GRAPH)
        return [r.to_json() async for r in store.dump()]


async def _dump(url: str) -> list[bytes]:
    async with open_graph_store(url) as store:
        return [r.to_json() async for r in store.dump()]


def test_reconcile_proposes_and_leaves_the_store_as_it_was(store_url: str) -> None:
    before = asyncio.run(_load(store_url))

    async def go() -> Any:
        async with open_graph_store(store_url) as store:
            config = DeduplicateRelationsConfig()
            return await Reconcile(store, config, embedder=HashEmbedder()).propose()

    output = asyncio.run(go())
    assert output.mapping == {"s2": "s1"}
    [survivor] = output.survivors
    assert survivor.relation_id == "s1"
    assert survivor.source_chunk_ids == ["chunk_s1", "chunk_s2"]  # nothing lost
    assert output.figures["blocks_decided"] == 1 and output.figures["relations_absorbed"] == 1
    assert asyncio.run(_dump(store_url)) == before


def test_reconcile_command_writes_the_proposal_to_out(store_url: str, tmp_path: Path) -> None:
    before = asyncio.run(_load(store_url))
    out = tmp_path / "out"
    done = relmerge("reconcile", store_url, "-o", out, "--embedding", "hash")
    assert done.returncode == 0, done.stderr
    assert "the store is unchanged" in done.stdout
    assert orjson.loads((out / "reconcile_mapping.json").read_bytes()) == {"s2": "s1"}
    survivors = [orjson.loads(line) for line in (out / "survivors.jsonl").read_bytes().splitlines()]
    assert [s["relation_id"] for s in survivors] == ["s1"]
    result = orjson.loads((out / "reconcile_result.json").read_bytes())
    assert result["relations_absorbed"] == 1 and "***" not in store_url
    assert asyncio.run(_dump(store_url)) == before


def test_reconcile_of_an_unreachable_store_is_exit_2(tmp_path: Path) -> None:
    done = relmerge("reconcile", f"sqlite:///{tmp_path / 'none.db'}", "-o", tmp_path / "out")
    assert done.returncode == 2 and "relmerge store init" in done.stderr
    assert not (tmp_path / "out").exists()


def test_review_answers_apply_when_the_same_reconcile_runs_again(
    store_url: str, tmp_path: Path
) -> None:
    from relmerge.data import sample_dir
    from relmerge.review.queue import ReviewQueue

    sample = sample_dir()
    assert relmerge("store", "init", store_url).returncode == 0
    loaded = relmerge("store", "load", store_url, sample / "relations.jsonl")
    assert loaded.returncode == 0, loaded.stderr
    out = tmp_path / "out"
    command = ("reconcile", store_url, "-o", out, "--embedding", "hash")
    first = relmerge(*command)
    assert first.returncode == 0 and "relmerge review" in first.stdout, first.stderr
    proposed = orjson.loads((out / "reconcile_mapping.json").read_bytes())
    queue = ReviewQueue(out)
    question = next(
        q
        for q in queue.pending()
        if len({proposed.get(m, m) for m in q["member_ids"]}) == len(q["member_ids"])
    )
    queue.answer(question["id"], "merge")  # answers.jsonl, as `relmerge review` writes it
    assert relmerge(*command).returncode == 0
    again = orjson.loads((out / "reconcile_mapping.json").read_bytes())
    assert len({again.get(m, m) for m in question["member_ids"]}) == 1


def test_reconcile_dry_run_counts_and_writes_nothing(store_url: str, tmp_path: Path) -> None:
    before = asyncio.run(_load(store_url))
    done = relmerge("reconcile", store_url, "-o", tmp_path / "out", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "blocks to decide: 1" in done.stdout and "pairs: 3" in done.stdout
    assert not (tmp_path / "out").exists()
    assert asyncio.run(_dump(store_url)) == before


async def _propose_and_apply(url: str) -> Any:
    async with open_graph_store(url) as store:
        reconcile = Reconcile(store, DeduplicateRelationsConfig(), embedder=HashEmbedder())
        output = await reconcile.propose()
        return output, await reconcile.apply(output), await reconcile.apply(output)


def test_applied_reconcile_absorbs_keeps_ids_resolvable_and_undoes(store_url: str) -> None:
    before = asyncio.run(_load(store_url))
    output, applied, again = asyncio.run(_propose_and_apply(store_url))
    assert applied.status == "applied" and applied.batch_id.startswith("reconcile-")
    assert applied.counts.absorbed == 1 and applied.counts.updated == 1
    assert again.status == "already_applied"
    [survivor] = output.survivors

    async def reads() -> Any:
        async with open_graph_store(store_url) as store:
            pair = ("e_ada", "e_norrbeck")
            state = (await store.relations_for_pairs([pair]))[pair]
            return (
                [r.relation_id async for r in store.dump()],
                [r.relation_id for r in state.relations],
                await store.relations_by_id(["s2", "s1", "nope"]),
                await store.folded(["s2"]),
                await store.info(last=1),
            )

    dumped, in_pair, by_id, folded, info = asyncio.run(reads())
    assert dumped == ["s1", "s3", "s4"] and in_pair == ["s1", "s3"]
    assert by_id == {"s2": survivor, "s1": survivor}  # an absorbed id resolves forever
    assert folded == {"s2": "s1"}
    assert info.relations == 3 and info.last_batches[0].kind == "reconcile"

    async def undo() -> Any:
        async with open_graph_store(store_url) as store:
            return await store.undo(applied.batch_id)

    assert asyncio.run(undo()).status == "undone"
    assert asyncio.run(_dump(store_url)) == before
    assert asyncio.run(reads())[4].relations == 4


def test_a_proposal_read_before_a_change_is_refused(store_url: str) -> None:
    import pytest

    from relmerge.errors import StoreError

    asyncio.run(_load(store_url))

    async def go() -> None:
        async with open_graph_store(store_url) as store:
            reconcile = Reconcile(store, DeduplicateRelationsConfig(), embedder=HashEmbedder())
            output = await reconcile.propose()
            fresh = await reconcile.propose()
            await reconcile.apply(fresh)
            with pytest.raises(StoreError, match="run reconcile again"):
                await reconcile.apply(
                    type(output)(
                        mapping=output.mapping,
                        survivors=[s.model_copy(update={"name": "x"}) for s in output.survivors],
                        read=output.read,
                    )
                )

    asyncio.run(go())


def test_reconcile_apply_command_then_store_undo(store_url: str, tmp_path: Path) -> None:
    before = asyncio.run(_load(store_url))
    out = tmp_path / "out"
    done = relmerge("reconcile", store_url, "-o", out, "--embedding", "hash", "--apply")
    assert done.returncode == 0, done.stderr
    result = orjson.loads((out / "reconcile_result.json").read_bytes())
    batch_id = result["batch_id"]
    assert f"applied as batch {batch_id}" in done.stdout
    assert [orjson.loads(r)["relation_id"] for r in asyncio.run(_dump(store_url))] == [
        "s1",
        "s3",
        "s4",
    ]
    undone = relmerge("store", "undo", store_url, batch_id)
    assert undone.returncode == 0, undone.stderr
    assert asyncio.run(_dump(store_url)) == before
