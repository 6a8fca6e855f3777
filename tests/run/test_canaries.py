"""Canary questions: a run measures its own LLM on pairs whose answer is certain, and a
sequential test decides, as the answers come, whether its merges are applied.

A model that answers right changes nothing (the canaries cost tokens, not output); a
model at chance is stopped as soon as the test crosses its boundary, is asked nothing
more, its merges are undone, its pairs go to review with the reason and the run exits 3;
a run too small to judge says so; with canaries off no canary is asked."""

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
from relmerge.providers.embedding import HashEmbedder
from tests.factories import record, run_step
from tests.support.dev_cli import DEV, dev_run_args
from tests.support.engines import dev_engine_run
from tests.support.gold_judge import dev_gold_judge, gold_task_handler
from tests.support.llm_server import LLMServer

needs_dev = pytest.mark.skipif(not DEV.is_dir(), reason="shared dev set not present")
NEVER = {"canary_false_stop": 1e-300, "canary_false_trust": 1e-300}  # no boundary crossed


def _judge(error_rate: float = 0.0) -> GoldJudge:
    return dev_gold_judge(DEV, error_rate)


def _decisions(store: Any) -> list[dict[str, Any]]:
    (key,) = [k for k in store.objects if k.endswith("decisions.jsonl")]
    return [json.loads(line) for line in store.objects[key].splitlines()]


def _clarifications(store: Any) -> list[dict[str, Any]]:
    (key,) = [k for k in store.objects if k.endswith("clarifications.jsonl")]
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
    canaries = on[0].result["canaries"]
    assert canaries["verdict"] == "trusted" and not canaries["distrusted"]
    assert canaries["right"] == canaries["answered"] == canaries["asked"] >= 13
    assert canaries["decided_after"] == {"answered": 13, "right": 13, "boundary": "trust"}
    assert "crosses the trust boundary" in canaries["reason"]
    # Canaries ride inside the real requests: tokens, not requests.
    assert canaries["extra_requests"] == 0
    assert on[0].result["llm_requests"] == off[0].result["llm_requests"]


@needs_dev
@pytest.mark.parametrize("pack", [0, DeduplicateRelationsConfig().llm_pack_tokens])
async def test_chunks_handed_out_after_the_model_is_trusted_carry_no_canaries(pack: int) -> None:
    """The run's verdict is final: the chunks handed out after it trusts the model carry
    no canaries (they would only cost tokens). A chunk's requests are fixed once it is
    handed out: the same chunk sends the same requests on a re-run."""
    config = DeduplicateRelationsConfig(records_per_chunk=60, llm_pack_tokens=pack)
    trusted, _ = await dev_engine_run(_judge(), LocalEngine(), config)
    judging, _ = await dev_engine_run(_judge(), LocalEngine(), config.model_copy(update=NEVER))
    assert trusted.result["chunk_count"] > 3
    assert trusted.result["canaries"]["verdict"] == "trusted"
    assert judging.result["canaries"]["verdict"] == "not_judged"
    assert trusted.result["canaries"]["asked"] < judging.result["canaries"]["asked"] / 2
    assert trusted.result["tokens"]["prompt"] < judging.result["tokens"]["prompt"]
    assert trusted.relation_id_mapping == judging.relation_id_mapping


@needs_dev
async def test_canaries_off_asks_none() -> None:
    output, _ = await dev_engine_run(
        _judge(), LocalEngine(), DeduplicateRelationsConfig(canaries=0)
    )
    assert output.result["canaries"]["asked"] == 0
    assert output.result["llm_requests"] > 0


@needs_dev
@pytest.mark.parametrize(("records_per_chunk", "pack"), [(5000, 8000), (5000, 0), (60, 8000)])
async def test_a_model_at_chance_stops_merging(records_per_chunk: int, pack: int) -> None:
    config = DeduplicateRelationsConfig(
        records_per_chunk=records_per_chunk, llm_pack_tokens=pack, canary_tokens=0.5
    )
    output, store = await dev_engine_run(_judge(0.5), LocalEngine(), config)
    canaries = output.result["canaries"]
    assert canaries["verdict"] == "distrusted" and canaries["distrusted"]
    decided = canaries["decided_after"]
    assert decided["boundary"] == "stop" and decided["right"] < 0.75 * decided["answered"]
    assert canaries["reworked_chunks"] >= 1
    # None of its merges is applied: every chunk that asked it was worked again without.
    assert not [d for d in _decisions(store) if d["tier"] == "llm"]
    assert output.result["llm_unavailable_group_count"] > 0
    reasons = [c["reason"] for c in _clarifications(store)]
    figures = f"the model answered {decided['right']} of {decided['answered']} certain"
    assert reasons and all(figures in reason for reason in reasons)


@needs_dev
async def test_a_stopped_model_is_asked_nothing_more() -> None:
    """One chunk, one question a request, one at a time: the questions not yet sent when
    the test stops the model go to clarifications at once, unsent."""
    config = DeduplicateRelationsConfig(llm_pack_tokens=0, concurrency=1)
    stopped, store = await dev_engine_run(_judge(0.5), LocalEngine(), config)
    heard_all, _ = await dev_engine_run(_judge(0.5), LocalEngine(), config.model_copy(update=NEVER))
    canaries = stopped.result["canaries"]
    assert canaries["verdict"] == "distrusted" and stopped.result["chunk_count"] == 1
    sent, all_requests = stopped.result["llm_requests"], heard_all.result["llm_requests"]
    assert sent < all_requests / 2
    # the last request sent tipped the test (its other canaries counted after it)
    assert 0 <= canaries["answered"] - canaries["decided_after"]["answered"] <= 2
    unsent = [c for c in _clarifications(store) if "the LLM was unavailable" in c["reason"]]
    assert len(unsent) > 0


async def test_a_run_too_small_to_judge_says_so_and_keeps_the_models_merges() -> None:
    """Two wordings of one fact: one question, a few canaries, no boundary crossed."""
    from relmerge.providers.fake import ScriptedLLM

    def merge_them(request: Any, records: list[dict[str, Any]]) -> Any:
        real = [r["relation_id"] for r in records if str(r["relation_id"]).startswith("r")]
        if request.task == "relation_judge":
            return {"verdict": "merge", "reason": "same", "duplicate_of": real[0]}
        return {"mapping_table": {real[0]: real[1:2]}}

    records = [
        record("r1", description="Ada Lind leads Norrbeck Systems as its chief executive."),
        record("r2", description="Norrbeck Systems is run by Ada Lind, who heads it."),
    ]
    output, _, _ = await run_step(
        records,
        ScriptedLLM(merge_them),
        embedder=HashEmbedder(),
        auto_merge_cosine=None,
        auto_keep_cosine=-1.0,
    )
    canaries = output.result["canaries"]
    assert canaries["verdict"] == "not_judged" and not canaries["distrusted"]
    assert 0 < canaries["answered"] < 6
    assert canaries["reason"].startswith(
        f"not enough canaries to judge the model: {canaries['answered']} answered"
    )
    assert output.relation_id_mapping["r1"] == output.relation_id_mapping["r2"]


@needs_dev
def test_cli_at_chance_over_http_exits_3_with_the_rule_and_its_figures(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with LLMServer(handler=gold_task_handler(_judge(0.5))) as server:
        args = dev_run_args(out, server.base_url, 4, "--no-cache", "--llm-pack-tokens", "0")
        args += ["--canary-tokens", "0.5"]
        ran = CliRunner().invoke(main, args)
    assert ran.exit_code == 3, ran.output
    result = json.loads((out / "deduplicate_relations_result.json").read_text())
    canaries = result["canaries"]
    decided = canaries["decided_after"]
    said = f"the model answered {decided['right']} of {decided['answered']} certain questions"
    assert said in ran.output and "stop boundary of Wald's sequential test" in ran.output
    assert canaries["verdict"] == "distrusted" and canaries["rule"]["false_stop"] == 0.01
    assert canaries["tokens"] == 0.5  # --canary-tokens reached the run's settings
    lines = (out / "clarifications.jsonl").read_text().splitlines()
    assert any(said in json.loads(line)["reason"] for line in lines)
