"""Canary questions: a run measures its own LLM on pairs whose answer is certain.

A model that answers right changes nothing (the canaries cost at most their share of
requests); a model at chance stops merging, its pairs go to review with the reason and
the run exits 3; with canaries off no canary is asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from relmerge.cli import main
from relmerge.config import DeduplicateRelationsConfig
from relmerge.engines.local import LocalEngine
from relmerge.eval.gold_judge import GoldJudge
from tests.support.dev_cli import DEV, dev_run_args
from tests.support.engines import dev_engine_run
from tests.support.gold_judge import dev_gold_judge, gold_task_handler
from tests.support.llm_server import LLMServer

needs_dev = pytest.mark.skipif(not DEV.is_dir(), reason="shared dev set not present")


def _judge(error_rate: float = 0.0) -> GoldJudge:
    return dev_gold_judge(DEV, error_rate)


def _decisions(store: Any) -> list[dict[str, Any]]:
    (key,) = [k for k in store.objects if k.endswith("decisions.jsonl")]
    return [json.loads(line) for line in store.objects[key].splitlines()]


def _verdicts(store: Any) -> list[tuple[list[str], str]]:
    return [(d["member_ids"], d["verdict"]) for d in _decisions(store)]


@needs_dev
@pytest.mark.parametrize("pack", [0, DeduplicateRelationsConfig().llm_pack_tokens])
async def test_a_model_that_answers_right_changes_no_output(pack: int) -> None:
    off_config = DeduplicateRelationsConfig(canaries=0, llm_pack_tokens=pack)
    off = await dev_engine_run(_judge(), LocalEngine(), off_config)
    on = await dev_engine_run(
        _judge(), LocalEngine(), DeduplicateRelationsConfig(llm_pack_tokens=pack)
    )
    # Relation files and clarifications: the same bytes. Decisions: the same verdicts
    # on the same members (a pair asked with canaries is a relation_cluster request).
    keys = [k for k in off[1].objects if not k.endswith("decisions.jsonl")]
    assert keys and all(on[1].objects[k] == off[1].objects[k] for k in keys)
    assert _verdicts(on[1]) == _verdicts(off[1])
    assert on[0].relation_id_mapping == off[0].relation_id_mapping
    canaries, requests = on[0].result["canaries"], off[0].result["llm_requests"]
    assert canaries["in_requests"] >= 10 and not canaries["distrusted"]
    assert canaries["right"] == canaries["answered"] == canaries["asked"]
    assert canaries["extra_requests"] <= 0.05 * requests
    tasks = on[0].result["cost"]["tasks"]
    if pack:  # canary records ride in the packs (and may cut one sooner: not counted here)
        assert "relation_cluster_many" in tasks
    else:  # inside the real requests: tokens, not requests
        assert on[0].result["llm_requests"] - canaries["extra_requests"] == requests


@needs_dev
async def test_canaries_off_asks_none() -> None:
    output, _ = await dev_engine_run(
        _judge(), LocalEngine(), DeduplicateRelationsConfig(canaries=0)
    )
    assert output.result["canaries"]["asked"] == 0
    assert output.result["llm_requests"] > 0


@needs_dev
@pytest.mark.parametrize(("records_per_chunk", "share"), [(5000, 0.05), (60, 0.05), (60, 0.5)])
async def test_a_model_at_chance_stops_merging(records_per_chunk: int, share: float) -> None:
    config = DeduplicateRelationsConfig(canaries=share, records_per_chunk=records_per_chunk)
    output, store = await dev_engine_run(_judge(0.5), LocalEngine(), config)
    canaries = output.result["canaries"]
    assert canaries["distrusted"] and canaries["answered"] >= 10
    assert canaries["right"] / canaries["answered"] < 0.8
    assert canaries["reworked_chunks"] >= 1
    extra = canaries["extra_requests"]
    assert extra <= share * (output.result["llm_requests"] - extra)
    # None of its merges is applied: every chunk that asked it was worked again without.
    assert not [d for d in _decisions(store) if d["tier"] == "llm"]
    assert output.result["llm_unavailable_group_count"] > 0
    (key,) = [k for k in store.objects if k.endswith("clarifications.jsonl")]
    reasons = [json.loads(line)["reason"] for line in store.objects[key].splitlines()]
    assert reasons and all("certain questions right" in reason for reason in reasons)


@needs_dev
async def test_a_surer_verdict_still_stops_a_model_at_chance() -> None:
    config = DeduplicateRelationsConfig(canary_confidence=0.95)
    output, store = await dev_engine_run(_judge(0.5), LocalEngine(), config)
    canaries = output.result["canaries"]
    assert canaries["distrusted"] and canaries["confidence"] == 0.95
    assert "surely below 0.8 at 0.95 confidence" in canaries["reason"]
    assert not [d for d in _decisions(store) if d["tier"] == "llm"]


@needs_dev
def test_cli_at_chance_over_http_exits_3_with_the_reason(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with LLMServer(handler=gold_task_handler(_judge(0.5))) as server:
        ran = CliRunner().invoke(main, dev_run_args(out, server.base_url, 4, "--no-cache"))
    assert ran.exit_code == 3, ran.output
    assert "certain questions right" in ran.output
    result = json.loads((out / "deduplicate_relations_result.json").read_text())
    assert result["canaries"]["distrusted"]
    assert result["canaries"]["right"] < 0.8 * result["canaries"]["answered"]
    lines = (out / "clarifications.jsonl").read_text().splitlines()
    assert any("certain questions right" in json.loads(line)["reason"] for line in lines)
