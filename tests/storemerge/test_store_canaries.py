"""The store merge's canaries, weighed by a sequential test kept in the store across
batches: the dev set merged into a SQLite store in small batches by ``relmerge
merge-into``, its LLM a real HTTP server that answers from the gold clusters, right or
at chance.

A model at chance is stopped once the test crosses its boundary (before any of its
merges is applied: until then its batches wait for the verdict without its merges),
every later batch asks it nothing, its pairs go to
clarifications.jsonl with the reason and the command exits 3; the store is never less
precise than with no LLM, and merges no hard negative. A model that answers right is
trusted once the test has enough answers (the first small batches wait for it), and one
pending reconcile then gives the store canaries off gives."""

from __future__ import annotations

import asyncio
import collections
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from relmerge.cli import main
from relmerge.eval.gold import load_gold
from relmerge.eval.metrics import evaluate
from relmerge.graphstore import open_graph_store
from tests.support.dev_cli import DEV
from tests.support.gold_judge import dev_gold_judge, gold_task_handler
from tests.support.llm_server import LLMServer

needs_dev = pytest.mark.skipif(not DEV.is_dir(), reason="shared dev set not present")
BATCHES = 20  # ~25 relations each: too few canaries to judge a model alone


def _batches(tmp_path: Path) -> list[Path]:
    """The dev relations dealt into ``BATCHES`` files (a gold cluster across several)."""
    lines = (DEV / "relations.jsonl").read_text().splitlines()
    paths = []
    for number in range(BATCHES):
        path = tmp_path / f"batch-{number}.jsonl"
        path.write_text("\n".join(lines[number::BATCHES]) + "\n")
        paths.append(path)
    return paths


def _merge_all(
    tmp_path: Path, name: str, llm: list[str], *extra: str
) -> tuple[str, list[tuple[int, dict[str, Any], str]], dict[str, str]]:
    """Every batch merged into a new store: (its URL, each command's exit status, result
    and stderr, and every input id's stored id)."""
    url = f"sqlite:///{tmp_path / name}.db"
    assert CliRunner().invoke(main, ["store", "init", url]).exit_code == 0
    runs, mapping = [], {}
    for number, batch in enumerate(_batches(tmp_path)):
        out = tmp_path / f"{name}-{number}"
        args = [
            "merge-into",
            url,
            str(batch),
            "-o",
            str(out),
            "--entity-mapping",
            str(DEV / "entity_id_mapping.json"),
            "--entities",
            str(DEV / "entities.jsonl"),
            "--embedding",
            "hash",
            "--no-cache",
            "-q",
            *llm,
            *extra,
        ]
        ran = CliRunner().invoke(main, args)
        assert ran.exit_code in (0, 3), ran.output
        result = orjson.loads((out / "deduplicate_relations_result.json").read_bytes())
        runs.append((ran.exit_code, result["store"], ran.output))
        mapping.update(orjson.loads((out / "relation_id_mapping.json").read_bytes()))
    return url, runs, mapping


def _hard_negative_merges(mapping: dict[str, str]) -> int:
    outputs: dict[str, set[str]] = collections.defaultdict(set)
    for relation_id, cluster in load_gold(DEV / "gold.jsonl").items():
        outputs[cluster].add(mapping[relation_id])
    lines = (DEV / "hard_negatives.jsonl").read_text().splitlines()
    return sum(
        bool(outputs[pair["cluster_a"]] & outputs[pair["cluster_b"]])
        for pair in map(orjson.loads, lines)
    )


def _precision(mapping: dict[str, str]) -> float:
    return evaluate(mapping, load_gold(DEV / "gold.jsonl")).pair_precision


async def _facts(url: str) -> set[frozenset[str]]:
    """The store's relations as sets of the input ids folded into each."""
    ids = [orjson.loads(line)["relation_id"] for line in (DEV / "relations.jsonl").open()]
    async with open_graph_store(url) as store:
        stored = await store.folded(ids)
    groups: dict[str, set[str]] = collections.defaultdict(set)
    for input_id, stored_id in stored.items():
        groups[stored_id].add(input_id)
    return {frozenset(group) for group in groups.values()}


def _llm(server: LLMServer) -> list[str]:
    return ["--llm-base-url", server.base_url, "--llm-model", "gold", "--concurrency", "4"]


@needs_dev
def test_a_model_at_chance_across_batches_is_distrusted(tmp_path: Path) -> None:
    _, _, rules_mapping = _merge_all(tmp_path, "rules", ["--llm", "none"])
    judge = dev_gold_judge(DEV, error_rate=0.5)
    with LLMServer(handler=gold_task_handler(judge)) as server:
        _, runs, mapping = _merge_all(tmp_path, "chance", _llm(server))
    figures = [result["canaries"] for _, result, _ in runs]
    tipped = next(i for i, f in enumerate(figures) if f["distrusted"])
    decided = figures[tipped]["decided_after"]
    assert decided["boundary"] == "stop" and decided["right"] < 0.75 * decided["answered"]
    # Before it: not judged yet, those batches waited for the verdict without its merges.
    assert all(f["waiting"] and not f["distrusted"] for f in figures[:tipped])
    # From the batch that tipped it on: distrusted, exit 3 with the reason, its pairs
    # for a person; after it, the model is asked nothing.
    for code, result, output in runs[tipped:]:
        assert code == 3 and "stop boundary of Wald's sequential test" in output
        assert result["canaries"]["distrusted"]
    assert all(result["llm_requests"] == 0 for _, result, _ in runs[tipped + 1 :])
    clarified = [
        orjson.loads(line)["reason"]
        for number in range(tipped, BATCHES)
        for line in (tmp_path / f"chance-{number}" / "clarifications.jsonl").open()
    ]
    assert clarified and all("certain questions right" in reason for reason in clarified)
    assert _precision(mapping) >= _precision(rules_mapping)
    assert _hard_negative_merges(mapping) <= _hard_negative_merges(rules_mapping) == 0


@needs_dev
def test_a_model_that_answers_right_is_trusted_and_the_batches_that_waited_reconcile(
    tmp_path: Path,
) -> None:
    """The first small batches carry too few canaries to judge the model: they wait for
    the verdict without its merges (exit 3, saying so), asking their own certain pairs as
    they go; once the test trusts it, batches apply its merges. One pending reconcile with
    the model then gives the store canaries off gives."""
    judge = dev_gold_judge(DEV)
    with LLMServer(handler=gold_task_handler(judge)) as server:
        on_url, on, _ = _merge_all(tmp_path, "on", _llm(server))
        off_url, off, _ = _merge_all(tmp_path, "off", _llm(server), "--canaries", "0")
        figures = [result["canaries"] for _, result, _ in on]
        trusted = next(i for i, f in enumerate(figures) if f["verdict"] == "trusted")
        for code, result, output in on[:trusted]:
            assert code == 3 and result["canaries"]["waiting"]
            assert "its merges are not applied until it is judged" in output
        assert sum(f["extra_requests"] for f in figures[:trusted]) > 0  # it asked to judge
        assert all(code == 0 and not r["canaries"]["reworked"] for code, r, _ in on[trusted:])
        last = figures[-1]
        assert last["verdict"] == "trusted" and last["agreement"] == 1.0
        assert last["trusted_tests"] >= 1  # the store's test renews after each trust verdict
        assert not last["distrusted"] and last["rule"]["good_agreement"] == 0.89
        assert all(result["canaries"]["asked"] == 0 for _, result, _ in off)
        reconcile = [
            "reconcile",
            on_url,
            "--pending",
            "--apply",
            "-o",
            str(tmp_path / "reconciled"),
            "--embedding",
            "hash",
            "--no-cache",
            *_llm(server),
        ]
        ran = CliRunner().invoke(main, reconcile)
        assert ran.exit_code == 0, ran.output
    # The same facts (a reconcile's survivor may keep another id and text than a merge's).
    assert asyncio.run(_facts(on_url)) == asyncio.run(_facts(off_url))
