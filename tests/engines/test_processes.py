"""The local engine's worker processes give a one-process run's outputs, keep the LLM in
the driver, and never leave a run hanging or a process behind."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from relmerge.cli import main
from relmerge.config import DeduplicateRelationsConfig
from relmerge.cputime import CpuMeter
from relmerge.engines.base import ChunkEngine, ChunkRun
from relmerge.engines.local import LocalEngine, default_engine
from relmerge.engines.processes import ProcessEngine, stop_workers
from relmerge.errors import ProviderError, WorkerDied
from relmerge.eval.gold import labelled_relations, load_gold
from relmerge.eval.gold_judge import GoldJudge
from relmerge.progress import NoProgress
from relmerge.providers.base import LanguageModel, LLMRequest, LLMResult, NoLanguageModel
from relmerge.providers.embedding import EmbeddingModel, HashEmbedder
from relmerge.stages.chunk import ChunkSettings
from tests.support.dev_cli import DEV, dev_rules_args, written_files
from tests.support.engines import (
    EngineRun,
    InFlight,
    Refused,
    Unreachable,
    assert_same_outputs,
    dev_engine_run,
)

needs_dev = pytest.mark.skipif(not DEV.is_dir(), reason="shared dev set not present")
CHUNKED = DeduplicateRelationsConfig(records_per_chunk=60)


async def _run(
    llm: LanguageModel,
    engine: ChunkEngine,
    config: DeduplicateRelationsConfig = CHUNKED,
    embedder: EmbeddingModel | None = None,
) -> EngineRun:
    """The dev set in many chunks (``CHUNKED``) unless ``config`` says otherwise."""
    return await dev_engine_run(llm, engine, config, embedder)


@needs_dev
async def test_rules_only_run_of_many_chunks_is_identical_and_its_cpu_is_the_workers() -> None:
    one = await _run(NoLanguageModel(), LocalEngine())
    engine = ProcessEngine(2)
    two = await _run(NoLanguageModel(), engine)
    assert_same_outputs(one, two, "chunk_count")
    assert one[0].result["chunk_count"] > 5 and one[0].result["semantic_merge_count"] > 0
    figures = two[0].result["engine"]
    assert figures["name"] == "local" and figures["workers"] == 2
    assert figures["chunks"] == one[0].result["chunk_count"]
    assert figures["worker_cpu_s"] > 0 and figures["nodes"] == []
    assert one[0].result["engine"]["worker_cpu_s"] == 0
    # The engine ended its workers with the run, and serves the next one as well.
    assert engine._pool == []
    assert_same_outputs(one, await _run(NoLanguageModel(), engine), "chunk_count")


@needs_dev
async def test_llm_run_is_identical_and_keeps_the_global_concurrency() -> None:
    gold, records = load_gold(DEV / "gold.jsonl"), labelled_relations(DEV / "gold.jsonl")
    # Canaries off: a canary asked on its own spends a credit its process's requests
    # earned, so worker processes ask other extra canaries than one process (their
    # equality with canaries on: test_canaries_measure_the_model_alike_on_workers).
    # One question a request: enough requests that the two workers overlap.
    config = DeduplicateRelationsConfig(
        concurrency=3, records_per_chunk=60, canaries=0, llm_pack_tokens=0
    )
    one = await _run(GoldJudge(gold, error_rate=0.2, records=records), LocalEngine(), config)
    model = InFlight(GoldJudge(gold, error_rate=0.2, records=records), pause=0.01)
    two = await _run(model, ProcessEngine(2), config)
    assert one[0].result["llm_requests"] > 0
    assert_same_outputs(one, two, "chunk_count")
    assert 2 <= model.most <= 3  # both workers asked at once, never more than the limit


VERDICT = ("verdict", "decided_after", "rule", "evidence", "distrusted", "reason")


@needs_dev
@pytest.mark.parametrize("error_rate", [0.0, 0.5])
async def test_canaries_measure_the_model_alike_on_workers(error_rate: float) -> None:
    """Canaries on: the verdict is taken in plan order, so it is the same, on the same
    answers, whichever worker was quicker; and so are the outputs (at chance: the same
    chunks' merges undone). What may differ is what the workers sent meanwhile: canaries
    in requests of a chunk already under way when the model was trusted (tokens), and
    answers of chunks in flight when it was stopped (counted, weighing nothing)."""
    gold, records = load_gold(DEV / "gold.jsonl"), labelled_relations(DEV / "gold.jsonl")
    config = DeduplicateRelationsConfig(records_per_chunk=60, canaries=0.2)
    one = await _run(GoldJudge(gold, error_rate, records=records), LocalEngine(), config)
    two = await _run(GoldJudge(gold, error_rate, records=records), ProcessEngine(2), config)
    canaries = one[0].result["canaries"]
    expected = "distrusted" if error_rate > 0 else "trusted"
    assert canaries["verdict"] == expected and canaries["decided_after"]["answered"] >= 6
    verdicts = [{k: run[0].result["canaries"][k] for k in VERDICT} for run in (one, two)]
    assert verdicts[0] == verdicts[1]
    assert one[1].objects == two[1].objects  # relation files, decisions, clarifications
    assert one[0].relation_id_mapping == two[0].relation_id_mapping
    for key in ("llm_unavailable_group_count", "clarification_count", "semantic_merge_count"):
        assert one[0].result[key] == two[0].result[key], key
    if error_rate == 0:
        assert canaries["right"] == canaries["answered"]
    else:
        assert canaries["reworked_chunks"] > 0


@needs_dev
async def test_default_model_vectors_are_those_of_one_process() -> None:
    """The workers load the default embedder themselves: the same vectors, so the same
    decisions, cosines included, as the one-process run's embedder with its helper."""
    from relmerge.providers.use_embed import UseEmbedder

    config = DeduplicateRelationsConfig(records_per_chunk=200)
    one = await _run(NoLanguageModel(), LocalEngine(), config, UseEmbedder())
    assert_same_outputs(
        one, await _run(NoLanguageModel(), ProcessEngine(2), config, UseEmbedder()), "chunk_count"
    )


@needs_dev
async def test_an_endpoint_that_cannot_work_stops_the_run_as_in_one_process() -> None:
    engine = ProcessEngine(2)
    with pytest.raises(ProviderError, match="401"):
        await _run(Refused(), engine)
    assert engine._pool == []  # no worker left behind


class KillsTheWorkers:
    """A model whose first request kills every worker process of ``engine``."""

    name = "killer"
    available = True

    def __init__(self, engine: ProcessEngine) -> None:
        self.engine = engine

    async def invoke(self, request: LLMRequest) -> LLMResult:
        for worker in self.engine._pool:
            os.kill(worker.process.pid, signal.SIGKILL)
        await asyncio.sleep(60)  # the run fails long before
        raise AssertionError("not reached")


@needs_dev
async def test_a_worker_that_dies_fails_the_run_with_a_clear_error_not_a_hang() -> None:
    engine = ProcessEngine(2)
    with pytest.raises(WorkerDied, match=r"ended in the middle of the run \(exit code -9\)"):
        await asyncio.wait_for(_run(KillsTheWorkers(engine), engine), 30)
    assert engine._pool == []


async def test_an_interrupted_run_can_end_every_worker_at_once() -> None:
    engine = ProcessEngine(2)
    run = ChunkRun(
        ChunkSettings(DeduplicateRelationsConfig()),
        NoLanguageModel(),
        HashEmbedder(),
        NoProgress(),
        CpuMeter(),
    )
    await engine._start(run)
    processes = [worker.process for worker in engine._pool]
    assert all(process.returncode is None for process in processes)
    stop_workers()
    codes = [await asyncio.wait_for(process.wait(), 10) for process in processes]
    assert codes == [-signal.SIGKILL] * 2
    await engine.close()


def test_the_default_engine_uses_workers_only_where_they_can_help(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    several = default_engine(3, HashEmbedder())
    assert isinstance(several, ProcessEngine) and several.workers == 3  # one per chunk
    assert isinstance(default_engine(1, HashEmbedder()), LocalEngine)  # one chunk
    assert isinstance(default_engine(9, None), LocalEngine)  # no semantic stage

    class Remote:  # an embedder a worker cannot build (an endpoint, a caller's object)
        name = "remote"

        async def embed(self, texts: Any) -> Any:
            raise AssertionError

    assert isinstance(default_engine(9, Remote()), LocalEngine)
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert isinstance(default_engine(9, HashEmbedder()), LocalEngine)


def _cli_outputs(out: Path, *extra: str) -> tuple[dict[str, bytes], dict[str, Any]]:
    result = CliRunner().invoke(main, dev_rules_args(out, *extra))
    assert result.exit_code == 0, result.output
    files = written_files(out)
    manifest = orjson.loads(files.pop("deduplicate_relations_result.json"))
    manifest.pop("seconds")
    engine = manifest.pop("engine")
    files["deduplicate_relations_result.json"] = orjson.dumps(manifest)
    return files, engine


@needs_dev
def test_cli_workers_write_the_outputs_of_one_process(tmp_path: Path) -> None:
    config = tmp_path / "relmerge.toml"
    config.write_text("records_per_chunk = 80\n")
    one, one_engine = _cli_outputs(tmp_path / "one", "--config", str(config), "--workers", "0")
    two, two_engine = _cli_outputs(tmp_path / "two", "--config", str(config), "--workers", "2")
    assert one == two
    assert one_engine["workers"] == 0 and one_engine["worker_cpu_s"] == 0
    assert two_engine["workers"] == 2 and two_engine["worker_cpu_s"] > 0
    # Again into the same OUT with the cache on: the vectors come from the driver's cache
    # through the desk, and the outputs stay the same.
    again, _ = _cli_outputs(tmp_path / "two", "--config", str(config), "--workers", "2")
    assert again == two


def test_workers_are_for_the_local_engine(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["run", "x.jsonl", "-o", str(tmp_path), "--engine", "ray", "--workers", "2"]
    )
    assert result.exit_code == 2
    assert "--workers is for --engine local" in result.output


class _LocalMemory:
    """Answers kept by an object of the caller's that cannot leave its process."""

    def __init__(self) -> None:
        self.lock = __import__("threading").Lock()

    def __len__(self) -> int:
        return 0

    def get(self, key: str) -> None:
        return None


async def test_settings_that_cannot_reach_a_worker_are_refused_with_the_way_out() -> None:
    from relmerge.errors import ConfigError

    engine = ProcessEngine(2)
    run = ChunkRun(
        ChunkSettings(CHUNKED, memory=_LocalMemory()),
        NoLanguageModel(),
        HashEmbedder(),
        NoProgress(),
        CpuMeter(),
    )
    with pytest.raises(ConfigError, match="--workers 0, or engine=LocalEngine"):
        await engine._start(run)
    assert engine._pool == []


@needs_dev
def test_the_summary_says_the_run_had_worker_processes(tmp_path: Path) -> None:
    config = tmp_path / "relmerge.toml"
    config.write_text("records_per_chunk = 80\n")
    args = ["run", str(DEV / "relations.jsonl"), "-o", str(tmp_path / "out")]
    args += ["--llm", "none", "--embedding", "hash", "--config", str(config), "--workers", "2"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "local: 2 worker processes" in result.output
    assert "CPU seconds: driver / workers" in result.output


@needs_dev
async def test_the_step_takes_an_engine_and_both_give_the_same_outputs() -> None:
    from relmerge import DeduplicateRelations, DictContext
    from tests.factories import store_with

    records = [orjson.loads(line) for line in (DEV / "relations.jsonl").read_bytes().splitlines()]
    outputs = []
    for engine in (LocalEngine(), ProcessEngine(2)):
        store, keys = store_with(records)
        step = DeduplicateRelations(CHUNKED, engine=engine)
        context = DictContext(
            {
                "stores.objects": store,
                "models.language": NoLanguageModel(),
                "models.embedding": HashEmbedder(),
            },
            {"relation_keys": keys, "entity_id_mapping": {}},
        )
        output = await step.run(context)
        outputs.append((output, store))
    (one, one_store), (two, two_store) = outputs
    assert one_store.objects == two_store.objects
    assert one.relation_id_mapping == two.relation_id_mapping
    assert one.result["chunk_count"] > 5
    assert (one.result["engine"]["workers"], two.result["engine"]["workers"]) == (0, 2)


@needs_dev
async def test_the_circuit_breaker_hears_the_workers_questions() -> None:
    """Questions that got no answer in a worker reach the driver's breaker: it opens,
    most groups are never asked, and the run completes with the rules' decisions."""
    model = Unreachable()
    output, _ = await _run(model, ProcessEngine(2))
    result = output.result
    assert result["llm_circuit_breaker"]["open"] is True
    unavailable = [i for i in result["issues"] if i["code"] == "llm_unavailable"]
    assert len(unavailable) == result["llm_unavailable_group_count"] > 0
    assert model.calls < CHUNKED.max_attempts * len(unavailable)  # most were never asked
    rules, _ = await _run(NoLanguageModel(), LocalEngine())
    assert output.relation_id_mapping == rules.relation_id_mapping
