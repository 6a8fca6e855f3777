"""A pass over a real LightRAG on its default file storages: merge, keep, re-embed, undo."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

pytest.importorskip("lightrag")

from lightrag import QueryParam

from relmerge.config import DeduplicateRelationsConfig
from relmerge.integrations.lightrag import deduplicate, undo
from tests.integrations.lightrag.support import Fact, Script, edges, insert, make_rag

FRIENDS = [
    ("doc-a", "Alice met Bob at school.", "Alice is a friend of Bob"),
    ("doc-b", "Alice and Bob play together.", "Alice is a friend of Bob."),
    ("doc-c", "Alice lent Bob a book.", "Alice lent Bob a book in 1998"),
    ("doc-d", "Bob returned it in 2001.", "Alice lent Bob a book in 2001"),
]


def script() -> Script:
    found = Script()
    for _, text, description in FRIENDS:
        found.facts[text] = [Fact("Alice", "Bob", "friendship", description)]
    return found


async def _built(folder: Path, given: Script) -> Any:
    rag = make_rag(folder, given)
    await rag.initialize_storages()
    for doc_id, text, _ in FRIENDS:
        await insert(rag, {doc_id: text})
    return rag


def test_a_pass_merges_repeats_keeps_facts_and_undo_restores(tmp_path: Path) -> None:
    async def scenario() -> None:
        given = script()
        rag = await _built(tmp_path / "rag", given)
        before = await edges(rag)
        edge = before[("Alice", "Bob")]
        assert edge["description"].count("<SEP>") == 3
        given.embedded.clear()
        done = await deduplicate(
            rag, output=tmp_path / "out", config=DeduplicateRelationsConfig(semantic_merge=False)
        )
        after = (await edges(rag))[("Alice", "Bob")]
        parts = after["description"].split("<SEP>")
        # the two wordings of one fact are one fragment; 1998 and 2001 stay apart
        assert len(parts) == 3
        assert sum("1998" in p for p in parts) == 1 and sum("2001" in p for p in parts) == 1
        assert after["source_id"] == edge["source_id"] and float(after["weight"]) == float(
            edge["weight"]
        )
        assert done.edges_read == 1 and done.edges_changed == 1
        assert done.fragments_before == 4 and done.fragments_after == 3
        assert any("Alice\tBob" in text for text in given.embedded)  # re-embedded
        data = await rag.aquery_data("Alice", QueryParam(mode="local"))
        found = [r["description"] for r in data["data"]["relationships"]]
        assert found == [after["description"]]
        taken = await undo(rag, tmp_path / "out")
        assert taken.restored == 1 and taken.rebased == 0
        restored = (await edges(rag))[("Alice", "Bob")]
        for name in ("description", "keywords", "source_id", "file_path"):
            assert restored[name] == edge[name]
        assert float(restored["weight"]) == float(edge["weight"])
        await rag.finalize_storages()

    asyncio.run(scenario())


RULES_ONLY = DeduplicateRelationsConfig(semantic_merge=False)
OTHERS = [
    ("doc-e", "Carol visits Dan.", [Fact("Carol", "Dan", "visit", "Carol visits Dan")]),
    ("doc-f", "Carol again visits Dan.", [Fact("Carol", "Dan", "visit", "Carol visits Dan.")]),
]


def test_a_pass_after_an_insert_reads_only_that_insert_s_edges(tmp_path: Path) -> None:
    async def scenario() -> None:
        given = script()
        for _, text, facts in OTHERS:
            given.facts[text] = facts
        rag = await _built(tmp_path / "rag", given)
        track = await insert(rag, {doc: text for doc, text, _ in OTHERS})
        done = await deduplicate(rag, output=tmp_path / "out", track_id=track, config=RULES_ONLY)
        assert sorted(done.documents) == ["doc-e", "doc-f"]
        assert done.edges_read == 1 and done.edges_changed == 1
        now = await edges(rag)
        assert now[("Carol", "Dan")]["description"].count("<SEP>") == 0
        assert now[("Alice", "Bob")]["description"].count("<SEP>") == 3  # not touched
        by_id = await deduplicate(
            rag, output=tmp_path / "out", documents=["doc-a"], config=RULES_ONLY
        )
        assert by_id.edges_read == 1 and by_id.edges_changed == 1
        await rag.finalize_storages()

    asyncio.run(scenario())


def test_documents_not_processed_yet_are_reported_not_read(tmp_path: Path) -> None:
    async def scenario() -> None:
        given = script()
        rag = await _built(tmp_path / "rag", given)
        await rag.apipeline_enqueue_documents(["Queued text about Erin."], ids=["doc-q"])
        done = await deduplicate(
            rag, output=tmp_path / "out", documents=["doc-q", "doc-none"], config=RULES_ONLY
        )
        assert done.waiting_documents == ["doc-q"] and done.unknown_documents == ["doc-none"]
        assert done.edges_read == 0 and done.edges_changed == 0
        await rag.finalize_storages()

    asyncio.run(scenario())


def test_a_pass_killed_while_writing_is_finished_by_running_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the first edge was written and persisted: the journal holds it as
    done, and the same call writes the other one."""
    from relmerge.integrations.lightrag import journal, passes
    from relmerge.integrations.lightrag.edits import EdgeWriter

    async def scenario() -> None:
        given = script()
        for _, text, facts in OTHERS:
            given.facts[text] = facts
        rag = await _built(tmp_path / "rag", given)
        await insert(rag, {doc: text for doc, text, _ in OTHERS})
        before = await edges(rag)
        real = EdgeWriter.write
        calls = 0

        async def dies_on_the_second(self: EdgeWriter, *args: Any) -> None:
            nonlocal calls
            calls += 1
            if calls > 1:
                raise KeyboardInterrupt
            await real(self, *args)

        monkeypatch.setattr(passes, "BATCH", 1)
        monkeypatch.setattr(EdgeWriter, "write", dies_on_the_second)
        with pytest.raises(KeyboardInterrupt):
            await deduplicate(rag, output=tmp_path / "out", config=RULES_ONLY)
        kept = journal.current(tmp_path / "out")
        assert kept is not None and kept.state == journal.APPLYING and kept.done() == {0}
        monkeypatch.setattr(EdgeWriter, "write", real)
        resumed = await deduplicate(rag, output=tmp_path / "out", config=RULES_ONLY)
        assert resumed.resumed and resumed.edges_changed == 2
        after = await edges(rag)
        assert all(after[p]["description"] != before[p]["description"] for p in after)
        await undo(rag, tmp_path / "out")
        assert {p: e["description"] for p, e in (await edges(rag)).items()} == {
            p: e["description"] for p, e in before.items()
        }
        await rag.finalize_storages()

    asyncio.run(scenario())


def test_undo_after_a_later_insert_keeps_what_the_insert_added(tmp_path: Path) -> None:
    async def scenario() -> None:
        given = script()
        given.facts["Alice sues Bob."] = [Fact("Alice", "Bob", "lawsuit", "Alice sued Bob in 2005")]
        rag = await _built(tmp_path / "rag", given)
        before = (await edges(rag))[("Alice", "Bob")]
        await deduplicate(rag, output=tmp_path / "out", config=RULES_ONLY)
        await insert(rag, {"doc-g": "Alice sues Bob."})
        grown = (await edges(rag))[("Alice", "Bob")]
        assert "sued" in grown["description"]
        taken = await undo(rag, tmp_path / "out")
        assert taken.rebased == 1 and taken.restored == 0
        now = (await edges(rag))[("Alice", "Bob")]
        parts = now["description"].split("<SEP>")
        assert parts[:4] == before["description"].split("<SEP>")
        assert parts[4:] == ["Alice sued Bob in 2005"]
        assert set(now["source_id"].split("<SEP>")) == set(grown["source_id"].split("<SEP>"))
        assert float(now["weight"]) == float(grown["weight"])
        await rag.finalize_storages()

    asyncio.run(scenario())


def test_undo_with_nothing_journalled_says_so(tmp_path: Path) -> None:
    from relmerge.errors import InputError

    with pytest.raises(InputError, match="no LightRAG pass to undo"):
        asyncio.run(undo(object(), tmp_path / "empty"))


PARAPHRASES = [
    ("doc-p", "Alice and Bob, since school.", "Alice is a close friend of Bob"),
    ("doc-q", "Years of friendship.", "Alice and Bob have been good friends for many years"),
]


def test_answers_given_in_review_are_applied_by_the_next_pass(tmp_path: Path) -> None:
    from relmerge.review.queue import ReviewQueue

    async def scenario() -> None:
        given = Script()
        for _, text, description in PARAPHRASES:
            given.facts[text] = [Fact("Alice", "Bob", "friendship", description)]
        rag = make_rag(tmp_path / "rag", given)
        await rag.initialize_storages()
        for doc_id, text, _ in PARAPHRASES:
            await insert(rag, {doc_id: text})
        out = tmp_path / "out"
        first = await deduplicate(rag, output=out)
        assert first.edges_changed == 0
        queue = ReviewQueue(out)
        pending = queue.pending()
        assert len(pending) == 1, "a person is asked about the two wordings"
        queue.answer(pending[0]["id"], "merge")
        second = await deduplicate(rag, output=out)
        assert second.edges_changed == 1 and second.fragments_after == 1
        merged = (await edges(rag))[("Alice", "Bob")]["description"]
        assert "close friend" in merged and "many years" in merged
        await rag.finalize_storages()

    asyncio.run(scenario())


def test_a_pass_asks_a_real_openai_compatible_endpoint_like_run_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The paraphrases only a judge can merge are merged; the other fact stays; the pass
    asks exactly what ``relmerge run`` asks of the records it wrote to OUT."""
    from relmerge.config import LLMSettings
    from relmerge.eval.gold_judge import GoldJudge
    from tests.support.cli_process import relmerge
    from tests.support.gold_judge import gold_task_handler
    from tests.support.llm_server import LLMServer

    labelled = [
        ("g1", "Alice is a close friend of Bob", "friends"),
        ("g2", "Alice and Bob have been good friends for many years", "friends"),
        ("g3", "Alice lent Bob a book in 1998", "book"),
    ]
    records = [
        {"relation_id": rid, "description": text, "name": "friendship",
         "source_entity_name": "Alice", "target_entity_name": "Bob"}
        for rid, text, _ in labelled
    ]  # fmt: skip
    judge = GoldJudge({rid: cluster for rid, _, cluster in labelled}, records=records)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")

    async def scenario(url: str) -> Any:
        given = Script()
        for number, (_, text, _) in enumerate(labelled):
            given.facts[f"Document {number}."] = [Fact("Alice", "Bob", "friendship", text)]
        rag = make_rag(tmp_path / "rag", given)
        await rag.initialize_storages()
        for number in range(len(labelled)):
            await insert(rag, {f"doc-{number}": f"Document {number}."})
        settings = LLMSettings(provider="openai", base_url=url, model="judge")
        done = await deduplicate(rag, output=tmp_path / "out", llm=settings, cache=False)
        parts = (await edges(rag))[("Alice", "Bob")]["description"].split("<SEP>")
        await rag.finalize_storages()
        return done, parts

    with LLMServer(handler=gold_task_handler(judge)) as server:
        done, parts = asyncio.run(scenario(server.base_url))
        assert len(parts) == 2 and sum("1998" in part for part in parts) == 1
        assert done.run is not None and done.run.llm_requests >= 1
        lightrag = tmp_path / "out" / "lightrag"
        done_cli = relmerge(
            "run", lightrag / "relations.jsonl", "--entities", lightrag / "entities.jsonl",
            "--output", tmp_path / "run", "--llm-base-url", server.base_url,
            "--llm-model", "judge", "--no-cache", "-q",
        )  # fmt: skip
    assert done_cli.returncode == 0, done_cli.stderr
    result = orjson.loads((tmp_path / "run" / "deduplicate_relations_result.json").read_bytes())
    assert result["llm_requests"] == done.run.llm_requests
    mapping = orjson.loads((tmp_path / "run" / "relation_id_mapping.json").read_bytes())
    ours = orjson.loads((tmp_path / "out" / "relation_id_mapping.json").read_bytes())
    assert mapping == ours


def test_a_pass_after_an_insert_judges_new_fragments_against_settled_ones_only(
    tmp_path: Path,
) -> None:
    """The first pass settles what it decided; after an insert, the next pass asks the
    judge about the new fragment alone (no pair of settled fragments is shown again),
    and ``redecide`` shows them all again."""
    from relmerge.eval.gold_judge import GoldJudge

    labelled = [
        ("g1", "Alice is a close friend of Bob", "friends"),
        ("g2", "Alice and Bob have been good friends for many years", "friends"),
        ("g3", "Alice lent Bob a book in 1998", "book"),
        ("g4", "Alice and Bob are friends since childhood", "friends"),
    ]
    records = [
        {"relation_id": rid, "description": text, "name": "friendship",
         "source_entity_name": "Alice", "target_entity_name": "Bob"}
        for rid, text, _ in labelled
    ]  # fmt: skip
    shown: list[list[str]] = []  # the descriptions each request showed

    class Recording(GoldJudge):
        def answer(self, task: str, records: list[dict[str, Any]]) -> dict[str, Any]:
            shown.append(sorted(str(r.get("description")) for r in records))
            return super().answer(task, records)

    judge = Recording({rid: cluster for rid, _, cluster in labelled}, records=records)

    async def scenario() -> None:
        given = Script()
        for number, (_, text, _) in enumerate(labelled):
            given.facts[f"Document {number}."] = [Fact("Alice", "Bob", "friendship", text)]
        rag = make_rag(tmp_path / "rag", given)
        await rag.initialize_storages()
        for number in range(3):
            await insert(rag, {f"doc-{number}": f"Document {number}."})
        out = tmp_path / "out"
        first = await deduplicate(rag, output=out, llm=judge, cache=False)
        assert first.fragments_settled == 0 and first.fragments_after == 2
        await insert(rag, {"doc-3": "Document 3."})
        shown.clear()
        second = await deduplicate(rag, output=out, documents=["doc-3"], llm=judge, cache=False)
        assert second.fragments_before == 3 and second.fragments_settled == 2
        assert second.fragments_after == 2  # the new wording joined the friends fragment
        parts = (await edges(rag))[("Alice", "Bob")]["description"].split("<SEP>")
        assert any("childhood" in p and "many years" in p for p in parts)
        assert sum("1998" in p for p in parts) == 1
        # every request of the second pass shows the new wording: none is about settled
        # fragments alone
        assert shown and all(any("childhood" in d for d in request) for request in shown)
        shown.clear()
        again = await deduplicate(rag, output=out, llm=judge, cache=False, redecide=True)
        assert again.fragments_settled == 0 and again.edges_changed == 0
        assert shown  # judged again
        await rag.finalize_storages()

    asyncio.run(scenario())
