"""``reconcile --pending`` on both backends: batches merged with rules only, then one
reconcile with the LLM asks about each touched block once; the next one reads only what
changed since (and the pairs the last one left open)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from relmerge import DeduplicateRelationsConfig
from relmerge.eval.gold_judge import GoldJudge
from relmerge.graphstore import open_graph_store
from relmerge.providers.base import LLMRequest, LLMResult
from relmerge.providers.embedding import HashEmbedder
from relmerge.providers.fake import request_records
from relmerge.run.reconcile import Reconcile, ReconcileOutput
from relmerge.run.store_merge import StoreMerge
from tests.factories import record
from tests.support.cli_process import relmerge

ACME = {"source_entity_id": "e_acme", "target_entity_id": "e_bob"}
ACME_NAMES = {"source_entity_name": "Acme", "target_entity_name": "Bob"}
BATCHES = [
    [
        record("r1", description="Ada Lind runs Norrbeck Systems as its chief executive."),
        record("x1", description="Bob works for Acme.", name="works for", **ACME, **ACME_NAMES),
    ],
    [
        record("r2", description="Norrbeck Systems is headed by Ada Lind, its CEO."),
        record("r3", name="founded", description="Ada Lind founded Norrbeck Systems in 2001."),
    ],
    [record("r4", description="The top executive of Norrbeck Systems is Ada Lind.")],
]
NEWER = [record("r5", name="founded", description="Norrbeck Systems was founded by Ada.")]
GOLD = {"r1": "ceo", "r2": "ceo", "r4": "ceo", "r3": "founded", "r5": "founded", "x1": "works"}
PAIR = ("e_ada", "e_norrbeck")


class CountingJudge(GoldJudge):
    """The gold judge, counting the blocks it is asked about."""

    def __init__(self) -> None:
        super().__init__(GOLD, records=[r for batch in [*BATCHES, NEWER] for r in batch])
        self.asked: list[set[str]] = []

    async def invoke(self, request: LLMRequest) -> LLMResult:
        self.asked.append({str(r.get("relation_id")) for r in request_records(request)})
        return await super().invoke(request)


def config() -> DeduplicateRelationsConfig:
    return DeduplicateRelationsConfig(canaries=0)


async def _merge(url: str, batches: list[list[dict[str, Any]]], init: bool = False) -> None:
    async with open_graph_store(url) as store:
        if init:
            await store.init()
        for records in batches:
            await StoreMerge(store, config(), embedder=HashEmbedder()).merge(records)


async def _reconcile(url: str, llm: Any = None, apply: bool = True) -> ReconcileOutput:
    async with open_graph_store(url) as store:
        reconcile = Reconcile(store, config(), llm, HashEmbedder(), pending=True)
        output = await reconcile.propose()
        if apply:
            await reconcile.apply(output)
        return output


async def _pair_ids(url: str) -> list[str]:
    async with open_graph_store(url) as store:
        state = (await store.relations_for_pairs([PAIR]))[PAIR]
        return [r.relation_id for r in state.relations]


def test_one_pending_reconcile_asks_each_touched_block_once(store_url: str) -> None:
    asyncio.run(_merge(store_url, BATCHES, init=True))
    assert asyncio.run(_pair_ids(store_url)) == ["r1", "r2", "r3", "r4"]  # rules kept apart
    judge = CountingJudge()
    output = asyncio.run(_reconcile(store_url, judge))
    assert output.figures["relations_read"] == 5 and output.since == 0 and output.through == 3
    assert len(judge.asked) == 1 and {"r1", "r2", "r3", "r4"} <= judge.asked[0]
    assert output.mapping == {"r2": "r1", "r4": "r1"}
    assert asyncio.run(_pair_ids(store_url)) == ["r1", "r3"]

    again = CountingJudge()
    nothing = asyncio.run(_reconcile(store_url, again))
    assert nothing.figures["relations_read"] == 0 and again.asked == []
    assert not nothing.changes_store  # nothing new: no batch written

    asyncio.run(_merge(store_url, [NEWER]))
    later = CountingJudge()
    output = asyncio.run(_reconcile(store_url, later))
    assert (output.since, output.through) == (3, 5)  # the reconcile batch was 4
    assert output.figures["relations_read"] == 3  # r1, r3, r5
    assert len(later.asked) == 1 and output.mapping == {"r5": "r3"}


def test_pairs_left_open_stay_in_scope_until_decided(store_url: str) -> None:
    asyncio.run(_merge(store_url, BATCHES, init=True))
    unsure = asyncio.run(_reconcile(store_url))  # no LLM: the block's pairs stay open
    assert unsure.mapping == {} and unsure.clarifications and unsure.open_pairs == [PAIR]
    assert unsure.changes_store  # applied as the coverage line alone

    async def scope() -> Any:
        async with open_graph_store(store_url) as store:
            return await store.changes_since_reconcile()

    changes = asyncio.run(scope())
    assert changes.since == 3 and changes.pairs == (PAIR,)  # x1's pair is done
    judge = CountingJudge()
    decided = asyncio.run(_reconcile(store_url, judge))
    assert len(judge.asked) == 1 and decided.mapping == {"r2": "r1", "r4": "r1"}
    assert asyncio.run(scope()).pairs == ()


def test_undoing_a_reconcile_puts_its_batches_back_in_scope(store_url: str) -> None:
    asyncio.run(_merge(store_url, BATCHES, init=True))
    output = asyncio.run(_reconcile(store_url, CountingJudge()))

    async def undo_then_scope() -> Any:
        async with open_graph_store(store_url) as store:
            await store.undo(output.batch_id())
            return await store.changes_since_reconcile()

    changes = asyncio.run(undo_then_scope())
    assert changes.since == 0 and set(changes.pairs) == {PAIR, ("e_acme", "e_bob")}
    assert asyncio.run(_pair_ids(store_url)) == ["r1", "r2", "r3", "r4"]


def test_pending_dry_run_and_apply_from_the_command_line(store_url: str, tmp_path: Path) -> None:
    asyncio.run(_merge(store_url, BATCHES, init=True))
    planned = relmerge("reconcile", store_url, "-o", tmp_path / "plan", "--pending", "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert "relations read: 5" in planned.stdout and "blocks to decide: 1" in planned.stdout
    args = ("reconcile", store_url, "--pending", "--apply", "--embedding", "hash")
    first = relmerge(*args, "-o", tmp_path / "one")
    assert first.returncode == 0 and "applied as batch reconcile-" in first.stdout, first.stderr
    second = relmerge(*args, "-o", tmp_path / "two")
    assert second.returncode == 0, second.stderr
    assert "relations read: 4" in second.stdout  # no LLM: the pair the first left open
    assert "the store is unchanged" in second.stdout
