"""The end of a run's summary says what each issue means in words, not a bare code; the
counts before a noun agree with it ("1 other file", "removed 1 relation")."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.factories import record
from tests.support.cli_process import relmerge


def ceo(relation_id: str, target_id: str, target_name: str) -> dict[str, object]:
    return record(
        relation_id,
        source_entity_id="e_ada",
        source_entity_name="Ada",
        target_entity_id=target_id,
        target_entity_name=target_name,
        description="Ada is CEO.",
    )


def test_an_issue_is_explained_where_the_summary_prints_it(tmp_path: Path) -> None:
    source = tmp_path / "relations.jsonl"
    lines = [
        ceo("n1", "e_norrbeck_inc", "Norrbeck Systems Inc."),
        ceo("n2", "e_norrbeck", "Norrbeck Systems"),
    ]
    source.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    config = tmp_path / "relmerge.toml"
    config.write_text("similarity_threshold = 0.5\n")
    out = tmp_path / "out"
    done = relmerge(
        "run", source, "-o", out, "--embedding", "hash", "--llm", "none", "--config", config
    )
    assert done.returncode == 0, done.stderr
    result = orjson.loads((out / "deduplicate_relations_result.json").read_bytes())
    assert "possible_entity_duplicate" in {issue["code"] for issue in result["issues"]}
    text = " ".join(done.stdout.split())
    assert "issue: maybe one entity under two ids" in text
    assert (
        "maybe one entity under two ids (possible_entity_duplicate): Two entity pairs hold "
        "the same relation: the entities may be duplicates; fix the entity mapping upstream."
    ) in text


def test_counts_agree_with_their_nouns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'graph.db'}"
    assert relmerge("store", "init", url).returncode == 0
    source = tmp_path / "one.jsonl"
    source.write_bytes(orjson.dumps(ceo("n1", "e_norrbeck", "Norrbeck Systems")) + b"\n")
    loaded = relmerge("store", "load", url, source, "--batch-id", "one")
    assert loaded.returncode == 0, loaded.stderr
    assert ": 1 relation inserted, 0 already stored as they are, 0 entities written, " in (
        loaded.stdout
    )
    assert "0 records set aside." in loaded.stdout
    dumped = relmerge("store", "dump", url, tmp_path / "dump.jsonl")
    assert "Dumped 1 relation from" in dumped.stdout
    undone = relmerge("store", "undo", url, "one")
    assert undone.returncode == 0, undone.stderr
    assert "removed 1 relation it inserted, restored 0 it updated." in undone.stdout
