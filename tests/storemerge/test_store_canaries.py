"""The store merge's canaries over a rolling window kept in the store: the dev set merged
into a SQLite store in small batches by ``relmerge merge-into``, its LLM a real HTTP
server that answers from the gold clusters, right or at chance.

A model at chance is distrusted once the window can judge it (before any of its merges
is applied), every later batch asks it nothing, its pairs go to clarifications.jsonl
with the reason and the command exits 3; the store is never less precise than with no
LLM, and merges no hard negative. A model that answers right is never distrusted and
gives the same store as with canaries off."""

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


async def _dump(url: str) -> list[bytes]:
    async with open_graph_store(url) as store:
        return sorted([relation.to_json() async for relation in store.dump()])


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
    assert figures[tipped]["window_answered"] >= 10
    assert figures[tipped]["window_right"] < 0.8 * figures[tipped]["window_answered"]
    # From the batch that tipped it on: distrusted, exit 3 with the reason, its pairs
    # for a person; after it, the model is asked nothing.
    for code, result, output in runs[tipped:]:
        assert code == 3 and "certain questions right" in output
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
def test_a_model_that_answers_right_is_never_distrusted(tmp_path: Path) -> None:
    judge = dev_gold_judge(DEV)
    with LLMServer(handler=gold_task_handler(judge)) as server:
        on_url, on, _ = _merge_all(tmp_path, "on", _llm(server))
        off_url, off, _ = _merge_all(tmp_path, "off", _llm(server), "--canaries", "0")
    assert all(code == 0 and not result["canaries"]["reworked"] for code, result, _ in on)
    last = on[-1][1]["canaries"]
    assert last["window_answered"] >= 10 and last["agreement"] >= 0.8
    assert not last["distrusted"] and last["confidence"] == 0.5  # the verdict's default
    assert all(result["canaries"]["asked"] == 0 for _, result, _ in off)
    assert asyncio.run(_dump(on_url)) == asyncio.run(_dump(off_url))
