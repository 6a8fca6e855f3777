"""``store retract`` on both backends: a document taken back out of a store built by
merges, its merged relations rebuilt from their other members, relations left with no
chunk removed and reported; undo, a second run, a dry run, a store of schema version 1,
and the command line."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from relmerge import DeduplicateRelationsConfig, StoreMerge
from relmerge.decide.merged import joined_description
from relmerge.graphstore import open_graph_store, pair_of
from relmerge.providers.base import LLMRequest
from relmerge.providers.fake import ScriptedLLM, instant_merge_model
from relmerge.run.retract import RetractResult, retract
from tests.factories import record
from tests.graphstore.graphs import raw_execute
from tests.storemerge.test_processes import child, finish
from tests.support.cli_process import relmerge

ROOT = Path(__file__).resolve().parents[2]
CONFIG = DeduplicateRelationsConfig(semantic_merge=False)


def join_all(request: LLMRequest, records: list[dict[str, Any]]) -> dict[str, Any]:
    """A merge answer a rule would give: the first record's type and name, every
    description joined, the first value of each attribute."""
    first = records[0]
    attributes: dict[str, Any] = {}
    for item in records:
        for key, value in (item.get("attributes") or {}).items():
            attributes.setdefault(key, value)
    return {
        "relation": {
            "type": first["type"],
            "name": first["name"],
            "description": joined_description(item["description"] for item in records),
            "attributes": attributes,
        }
    }


def mention(relation_id: str, document: str, text: str, **fields: Any) -> dict[str, Any]:
    """One extraction of the shared fact (same pair, name and type) in ``document``."""
    return record(relation_id, document_id=document, description=text, **fields)


BATCHES = [
    [
        mention("a", "doc_1", "Ada Lind runs Norrbeck.", attributes={"since": "2019"}),
        mention("x", "doc_1", "Norrbeck's founder.", source_entity_id="e_other", name="founded"),
    ],
    [
        mention("b", "doc_2", "Ada Lind became CEO of Norrbeck.", attributes={"role": "CEO"}),
        mention("y", "doc_2", "Only doc_2 says this.", source_entity_id="e_solo", name="left"),
    ],
    [mention("c", "doc_3", "Norrbeck named Ada Lind chief executive.")],
]


async def _merge_all(url: str, batches: list[list[dict[str, Any]]], llm: Any = None) -> None:
    async with open_graph_store(url) as store:
        await store.init()
        for records in filter(None, batches):
            merge = StoreMerge(store, CONFIG, llm or ScriptedLLM(join_all, name="join"))
            await merge.merge(records)


def build(url: str, llm: Any = None) -> None:
    asyncio.run(_merge_all(url, BATCHES, llm))


async def _snapshot(url: str) -> dict[str, Any]:
    async with open_graph_store(url) as store:
        relations = [r.to_dict() async for r in store.dump()]
        ids = [r["relation_id"] for records in BATCHES for r in records]
        members = await store.members(relation_ids=[r["relation_id"] for r in relations])
        return {
            "relations": relations,
            "folded": await store.folded(ids),
            "members": sorted((m.member_id, m.relation_id) for m in members),
        }


def snapshot(url: str) -> dict[str, Any]:
    return asyncio.run(_snapshot(url))


def take_back(url: str, *documents: str, **options: Any) -> RetractResult:
    async def go() -> RetractResult:
        async with open_graph_store(url) as store:
            return await retract(store, documents, **options)

    return asyncio.run(go())


def stored(url: str) -> dict[str, Any]:
    return {r["relation_id"]: r for r in snapshot(url)["relations"]}


def test_a_merged_relation_is_rebuilt_from_its_other_members(store_url: str) -> None:
    build(store_url)
    before = stored(store_url)
    assert before["a"]["source_chunk_ids"] == ["chunk_a", "chunk_b", "chunk_c"]
    result = take_back(store_url, "doc_2")
    assert result.status == "applied" and result.batch_id.startswith("retract-")
    assert sorted(result.retracted) == ["b", "y"]
    after = stored(store_url)
    texts = [BATCHES[0][0]["description"], BATCHES[2][0]["description"]]
    assert after["a"]["description"] == joined_description(texts)
    assert after["a"]["source_chunk_ids"] == ["chunk_a", "chunk_c"]
    assert after["a"]["attributes"] == {"since": "2019"}  # b's "role" went with b
    assert [c.relation_id for c in result.of("rebuilt")] == ["a"]
    assert not result.refused_pairs  # the text was the members' join: no model call needed
    state = snapshot(store_url)
    assert ("b", "a") not in state["members"] and ("c", "a") in state["members"]
    assert "b" not in state["folded"] and state["folded"]["c"] == "a"


def test_a_relation_left_with_no_chunk_is_removed_and_reported(store_url: str) -> None:
    build(store_url)
    result = take_back(store_url, "doc_2")
    assert [c.relation_id for c in result.of("removed")] == ["y"]
    assert "y" in result.retracted
    assert "y" not in stored(store_url)
    assert "y" not in snapshot(store_url)["folded"]  # mapped to nothing, not to a relation


def test_a_chunk_can_be_taken_back(store_url: str) -> None:
    build(store_url)

    async def go() -> RetractResult:
        async with open_graph_store(store_url) as store:
            return await retract(store, chunks=["chunk_c"])

    result = asyncio.run(go())
    assert result.retracted == ("c",)
    assert stored(store_url)["a"]["source_chunk_ids"] == ["chunk_a", "chunk_b"]


def test_undo_restores_the_store(store_url: str) -> None:
    build(store_url)
    before = snapshot(store_url)
    result = take_back(store_url, "doc_2")

    async def undo() -> Any:
        async with open_graph_store(store_url) as store:
            return await store.undo(result.batch_id)

    undone = asyncio.run(undo())
    assert undone.status == "undone" and undone.restored == 2  # a rebuilt, y put back
    assert snapshot(store_url) == before  # relations in their order, members, mapping


def test_retracting_again_changes_nothing(store_url: str) -> None:
    build(store_url)
    take_back(store_url, "doc_2")
    after = snapshot(store_url)
    again = take_back(store_url, "doc_2")
    assert again.status == "nothing" and not again.changes
    assert snapshot(store_url) == after


def test_a_dry_run_writes_nothing(store_url: str) -> None:
    build(store_url)
    before = snapshot(store_url)
    planned = take_back(store_url, "doc_2", dry_run=True)
    assert planned.status == "dry_run"
    assert sorted(planned.retracted) == ["b", "y"]
    assert snapshot(store_url) == before
    assert take_back(store_url, "doc_2").batch_id == planned.batch_id


def test_text_the_model_wrote_is_rebuilt_and_left_to_reconcile(store_url: str) -> None:
    build(store_url, instant_merge_model())  # the model keeps the first text only
    assert stored(store_url)["a"]["description"] == BATCHES[0][0]["description"]
    result = take_back(store_url, "doc_2")
    assert result.refused_pairs == [pair_of("e_norrbeck", "e_ada")]
    texts = [BATCHES[0][0]["description"], BATCHES[2][0]["description"]]
    assert stored(store_url)["a"]["description"] == joined_description(texts)

    async def pending() -> Any:
        async with open_graph_store(store_url) as store:
            return await store.changes_since_reconcile()

    assert pair_of("e_norrbeck", "e_ada") in asyncio.run(pending()).pairs


def test_every_member_of_a_relation_taken_back_removes_it(store_url: str) -> None:
    build(store_url)
    result = take_back(store_url, "doc_1", "doc_2", "doc_3")
    assert sorted(c.relation_id for c in result.of("removed")) == ["a", "x", "y"]
    assert sorted(result.retracted) == ["a", "b", "c", "x", "y"]
    assert stored(store_url) == {}


def test_a_store_of_schema_version_1_is_upgraded(store_url: str) -> None:
    """Members were not kept: each relation becomes its own member; a merged one only
    loses the retracted chunk ids (found by chunk: its own document is its first
    member's), and the result says its members are unknown."""
    build(store_url)
    for sql in (
        "DROP TABLE relmerge_members",
        "DROP TABLE relmerge_member_chunks",
        "UPDATE relmerge_meta SET value = '1' WHERE key = 'schema_version'",
    ):
        raw_execute(store_url, sql)
    before = stored(store_url)  # opening the store upgrades it
    result = take_back(store_url, "doc_2", chunks=["chunk_b"])
    assert [c.relation_id for c in result.of("trimmed")] == ["a"]
    assert [c.relation_id for c in result.of("removed")] == ["y"]
    after = stored(store_url)
    assert after["a"]["source_chunk_ids"] == ["chunk_a", "chunk_c"]
    assert after["a"]["description"] == before["a"]["description"]  # wording kept


def test_store_init_says_it_upgraded_a_store_of_schema_version_1(store_url: str) -> None:
    build(store_url)
    for sql in (
        "DROP TABLE relmerge_members",
        "DROP TABLE relmerge_member_chunks",
        "UPDATE relmerge_meta SET value = '1' WHERE key = 'schema_version'",
    ):
        raw_execute(store_url, sql)
    done = relmerge("store", "init", store_url)
    assert done.returncode == 0, done.stderr
    assert "upgraded from version 1 at " in done.stdout and "nothing to do" not in done.stdout
    assert sorted(stored(store_url)) == ["a", "x", "y"]


def test_the_batch_is_a_retract_in_the_store(store_url: str) -> None:
    build(store_url)
    result = take_back(store_url, "doc_2")

    async def go() -> Any:
        async with open_graph_store(store_url) as store:
            return await store.batch(result.batch_id)

    batch = asyncio.run(go())
    assert batch.kind == "retract" and batch.counts.removed == 1 and batch.counts.updated == 1


# -- the command line ----------------------------------------------------------------


def test_the_command_line(store_url: str) -> None:
    build(store_url)
    nothing_asked = relmerge("store", "retract", store_url)
    assert nothing_asked.returncode == 2 and "--document" in nothing_asked.stderr
    dry = relmerge("store", "retract", store_url, "--document", "doc_2", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("Would retract document(s) doc_2")
    assert "Dry run: nothing was written." in dry.stdout
    done = relmerge("store", "retract", store_url, "--document", "doc_2")
    assert done.returncode == 0, done.stderr
    assert "retracted (mapped to nothing): " in done.stdout
    assert "removed relations: y" in done.stdout and "rebuilt relations: a" in done.stdout
    assert "Undo with: relmerge store undo" in done.stdout
    again = relmerge("store", "retract", store_url, "--document", "doc_2", "--json")
    assert again.returncode == 0 and orjson.loads(again.stdout)["status"] == "nothing"


def test_the_command_line_on_no_store_is_exit_2(tmp_path: Path) -> None:
    missing = relmerge("store", "retract", f"sqlite:///{tmp_path / 'none.db'}", "--document", "d")
    assert missing.returncode == 2 and missing.stderr.startswith("error: no relmerge store")


# -- a killed retract ----------------------------------------------------------------


@pytest.mark.parametrize("pause_at", [0, 1, -1])
def test_a_killed_retract_run_again_equals_an_uninterrupted_one(
    store_url: str, tmp_path: Path, pause_at: int
) -> None:
    from tests.graphstore.test_processes import kill_when_paused

    build(store_url)
    kill_when_paused(_child(store_url, "doc_2", "--pause-at", str(pause_at)))
    done = finish(_child(store_url, "doc_2"))
    assert done["status"] == ("nothing" if pause_at == -1 else "applied")
    reference = f"sqlite:///{tmp_path / 'reference.db'}"
    build(reference)
    finish(_child(reference, "doc_2"))
    assert snapshot(store_url) == snapshot(reference)


def _child(*args: str) -> subprocess.Popen[bytes]:
    return child(*args, module="tests.storemerge.retract_child")


async def _shape(url: str) -> set[tuple[str, tuple[str, ...], str]]:
    async with open_graph_store(url) as store:
        relations = [r async for r in store.dump()]
        members = await store.members(relation_ids=[r.relation_id for r in relations])
    of: dict[str, list[str]] = {}
    for member in members:
        of.setdefault(member.relation_id, []).append(member.member_id)
    return {(r.relation_id, tuple(sorted(of[r.relation_id])), r.description) for r in relations}


@pytest.mark.parametrize("document", ["doc_1", "doc_2", "doc_3"])
def test_the_store_equals_one_built_without_the_document(
    store_url: str, tmp_path: Path, document: str
) -> None:
    """Stored ids included: where the id came from a member taken back (doc_1 gave "a"),
    the relation gets the id its remaining members would have got, and the old id
    resolves to it."""
    build(store_url)
    before = snapshot(store_url)
    result = take_back(store_url, document)
    reference = f"sqlite:///{tmp_path / 'without.db'}"
    without = [[r for r in records if r["document_id"] != document] for records in BATCHES]
    asyncio.run(_merge_all(reference, without))
    assert asyncio.run(_shape(store_url)) == asyncio.run(_shape(reference))
    if document == "doc_1":
        assert [c.renamed_to for c in result.of("rebuilt")] == ["b"]
        assert snapshot(store_url)["folded"]["c"] == "b"

    async def undo() -> Any:
        async with open_graph_store(store_url) as store:
            return await store.undo(result.batch_id)

    assert asyncio.run(undo()).status == "undone"
    assert snapshot(store_url) == before  # a renamed relation back under its id, in place


class _MergeMeanwhile:
    """The store, with another process's merge landing between the retract's reads and
    its first apply (the same fact again, from a fourth document)."""

    def __init__(self, store: Any, url: str) -> None:
        self._store = store
        self._url = url
        self.merged = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def apply_batch(self, batch: Any, progress: Any = None) -> Any:
        if not self.merged:
            self.merged = True
            await _merge_all(self._url, [[mention("d", "doc_4", "Ada Lind leads Norrbeck.")]])
        return await self._store.apply_batch(batch, progress)


def test_a_merge_meanwhile_is_kept_the_retract_plans_again(store_url: str) -> None:
    build(store_url)

    async def go() -> RetractResult:
        async with open_graph_store(store_url) as store:
            return await retract(_MergeMeanwhile(store, store_url), ["doc_2"])

    result = asyncio.run(go())
    assert result.status == "applied" and result.conflict_retries == 1
    texts = [m["description"] for m in (BATCHES[0][0], BATCHES[2][0])]
    assert stored(store_url)["a"]["description"] == joined_description(
        [*texts, "Ada Lind leads Norrbeck."]
    )
    members = snapshot(store_url)["members"]
    assert [m for m, r in members if r == "a"] == ["a", "c", "d"]


def test_a_reconcile_moves_absorbed_members_to_their_survivor(store_url: str) -> None:
    from relmerge import ExtractedRelation
    from relmerge.providers.embedding import HashEmbedder
    from relmerge.run.reconcile import Reconcile

    text = "Ada Lind runs Norrbeck."
    graph = [
        ExtractedRelation(**mention("s1", "doc_1", text)),
        ExtractedRelation(**mention("s2", "doc_2", text)),  # loaded as is: never deduplicated
    ]

    async def go() -> Any:
        async with open_graph_store(store_url) as store:
            await store.init()
            await store.load(graph)
            reconcile = Reconcile(store, DeduplicateRelationsConfig(), embedder=HashEmbedder())
            applied = await reconcile.apply(await reconcile.propose())
            members = await store.members(relation_ids=["s1"])
            return applied, [m.member_id for m in members]

    applied, members = asyncio.run(go())
    assert applied.counts.absorbed == 1 and members == ["s1", "s2"]
    assert stored(store_url)["s1"]["source_chunk_ids"] == ["chunk_s1", "chunk_s2"]
    result = take_back(store_url, "doc_2")
    assert result.retracted == ("s2",) and [c.relation_id for c in result.of("rebuilt")] == ["s1"]
    assert stored(store_url)["s1"] == graph[0].to_dict()  # its one member, as it came


def test_another_documents_record_citing_the_same_chunk_stays(store_url: str) -> None:
    """A record of doc_2 that cites a chunk of doc_1 takes back only itself."""
    cites = mention("z", "doc_2", "Cites doc_1's chunk.", chunk_id="chunk_x", name="cites")
    asyncio.run(_merge_all(store_url, [[BATCHES[0][1]], [cites]]))
    before = stored(store_url)["x"]
    result = take_back(store_url, "doc_2")
    assert result.retracted == ("z",)
    assert stored(store_url) == {"x": before}
