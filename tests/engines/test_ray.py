"""``--engine ray`` gives the local engine's results, on a 2-CPU Ray started here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from relmerge.cli import main
from relmerge.config import DeduplicateRelationsConfig
from relmerge.engines.local import LocalEngine
from relmerge.engines.outputs import SharedOutputs, WrittenOutputs
from relmerge.errors import ConfigError, ProviderError
from relmerge.eval.gold import labelled_relations, load_gold
from relmerge.eval.gold_judge import GoldJudge
from relmerge.ids import merged_relation_id
from relmerge.progress import NoProgress
from relmerge.providers.base import NoLanguageModel
from relmerge.run.writer import OutputWriter
from relmerge.stores.local import LocalStore
from relmerge.stores.memory import MemoryStore
from tests.support.dev_cli import DEV, dev_rules_args, written_files
from tests.support.engines import (
    InFlight,
    Refused,
    Unreachable,
    assert_same_outputs,
    dev_engine_run,
    relation_files_put,
    run_into,
)

ray = pytest.importorskip("ray")
from relmerge.engines.ray_engine import RayEngine  # noqa: E402

needs_dev = pytest.mark.skipif(not DEV.is_dir(), reason="shared dev set not present")


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@needs_dev
async def test_rules_only_run_is_identical() -> None:
    local = await dev_engine_run(NoLanguageModel(), LocalEngine())
    assert local[0].result["semantic_merge_count"] > 0
    assert_same_outputs(local, await dev_engine_run(NoLanguageModel(), RayEngine()))


@needs_dev
async def test_llm_run_is_identical_and_keeps_the_global_concurrency() -> None:
    gold, records = load_gold(DEV / "gold.jsonl"), labelled_relations(DEV / "gold.jsonl")
    config = DeduplicateRelationsConfig(concurrency=3)
    local = await dev_engine_run(
        GoldJudge(gold, error_rate=0.2, records=records), LocalEngine(), config
    )
    model = InFlight(GoldJudge(gold, error_rate=0.2, records=records), pause=0.02)
    distributed = await dev_engine_run(model, RayEngine(), config)
    assert local[0].result["llm_requests"] > 0
    assert_same_outputs(local, distributed)
    assert 1 <= model.most <= 3


@needs_dev
async def test_an_endpoint_that_cannot_work_stops_the_run_as_locally() -> None:
    with pytest.raises(ProviderError, match="401"):
        await dev_engine_run(Refused(), LocalEngine())
    with pytest.raises(ProviderError, match="401"):
        await dev_engine_run(Refused(), RayEngine())


@needs_dev
@pytest.mark.parametrize("engine", ["local", "ray"])
async def test_the_circuit_breaker_stops_the_sending_on_both_engines(engine: str) -> None:
    """Questions from Ray workers reach the driver's breaker as a local run's do: after
    five unanswered questions nothing more is sent, and the run completes with the rules'
    decisions and one ``llm_unavailable`` issue per group left."""
    model = Unreachable()
    output, store = await dev_engine_run(model, LocalEngine() if engine == "local" else RayEngine())
    result = output.result
    assert result["llm_circuit_breaker"]["open"] is True
    config = DeduplicateRelationsConfig()
    # The tripping questions and those in flight (per Ray worker) when it opened.
    in_flight = config.concurrency * (2 if engine == "ray" else 1)
    assert model.calls <= config.max_attempts * (5 + in_flight)
    unavailable = [i for i in result["issues"] if i["code"] == "llm_unavailable"]
    assert len(unavailable) == result["llm_unavailable_group_count"] == result["failed_group_count"]
    assert model.calls < config.max_attempts * len(unavailable)  # most were never asked
    rules, rules_store = await dev_engine_run(NoLanguageModel(), LocalEngine())
    assert output.relation_id_mapping == rules.relation_id_mapping

    def asked(written: MemoryStore) -> set[str]:
        lines = written.objects["clarifications.jsonl"].splitlines()
        return {orjson.loads(line)["id"] for line in lines}

    assert asked(store) == asked(rules_store) != set()  # the questions of a run without one


@needs_dev
def test_cli_engine_ray_writes_the_local_outputs(tmp_path: Path) -> None:
    outputs: dict[str, Any] = {}
    for engine in ("local", "ray"):
        out = tmp_path / engine
        result = CliRunner().invoke(main, dev_rules_args(out, "--engine", engine))
        assert result.exit_code == 0, result.output
        outputs[engine] = written_files(out)
    manifest = "deduplicate_relations_result.json"
    local, distributed = outputs["local"], outputs["ray"]
    engines = {}
    for name, result in (("local", local), ("ray", distributed)):
        parsed = orjson.loads(result.pop(manifest))
        parsed.pop("seconds")
        engines[name] = parsed.pop("engine")
        result[manifest] = parsed
    assert local == distributed
    assert engines["local"]["name"] == "local" and engines["local"]["worker_cpu_s"] == 0
    assert engines["ray"]["name"] == "ray" and engines["ray"]["worker_cpu_s"] > 0


def test_ray_address_needs_the_ray_engine(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["run", "x.jsonl", "-o", str(tmp_path), "--ray-address", "auto"]
    )
    assert result.exit_code == 2
    assert "--ray-address needs --engine ray" in result.output


def test_engine_ray_without_ray_installed_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import relmerge.engines.ray_engine as ray_engine

    def missing() -> None:
        raise ConfigError(ray_engine.NO_RAY)

    monkeypatch.setattr(ray_engine, "import_ray", missing)
    result = CliRunner().invoke(main, ["run", "x.jsonl", "-o", str(tmp_path), "--engine", "ray"])
    assert result.exit_code == 2
    assert "pip install relmerge[ray]" in result.output


@needs_dev
async def test_a_window_of_one_chunk_gives_the_local_outputs_of_many_chunks() -> None:
    config = DeduplicateRelationsConfig(records_per_chunk=60)
    local = await dev_engine_run(NoLanguageModel(), LocalEngine(), config)
    distributed = await dev_engine_run(NoLanguageModel(), RayEngine(window=1), config)
    assert_same_outputs(local, distributed)
    assert local[0].result["chunk_count"] > 5
    engine = distributed[0].result["engine"]
    assert engine["chunks"] == local[0].result["chunk_count"] and engine["worker_cpu_s"] > 0


@needs_dev
async def test_workers_write_the_relation_files_of_a_local_run(tmp_path: Path) -> None:
    """Into a local directory the Ray workers write the relation files themselves: the
    same files, bytes and ids as the local engine's, none of them put by the driver."""
    local, local_store = await run_into(tmp_path / "local", LocalEngine())
    distributed, ray_store = await run_into(tmp_path / "ray", RayEngine())
    assert written_files(tmp_path / "local") == written_files(tmp_path / "ray")
    assert local.relation_id_mapping == distributed.relation_id_mapping
    assert local.relation_keys == distributed.relation_keys
    assert list(local.relations) == list(distributed.relations)
    assert len(relation_files_put(local_store)) == local.result["output_relation_count"]
    assert relation_files_put(ray_store) == []  # every one written by a worker
    assert distributed.result["engine"]["stages"]["write"]["workers_s"] > 0
    assert distributed.result["chunk_count"] > 5 and local.result["semantic_merge_count"] > 0


@needs_dev
async def test_a_merged_id_an_input_carries_is_freed_on_the_worker(tmp_path: Path) -> None:
    """A merged relation whose id an input already carries gets the salted id on the
    worker that writes it, as the driver of a local run gives it."""
    first, _ = await run_into(tmp_path / "first", LocalEngine())
    members_of: dict[str, list[str]] = {}
    for member, output_id in first.relation_id_mapping.items():
        members_of.setdefault(output_id, []).append(member)
    merged = next(r for r in first.relations if len(members_of[r.relation_id]) > 1)
    members = members_of[merged.relation_id]
    alone = next(out for out, ids in members_of.items() if ids == [out])
    lines = (DEV / "relations.jsonl").read_bytes().splitlines()
    forged = tmp_path / "forged.jsonl"
    forged.write_bytes(
        b"\n".join(line.replace(alone.encode(), merged.relation_id.encode()) for line in lines)
        + b"\n"
    )
    local, _ = await run_into(tmp_path / "local", LocalEngine(), forged)
    distributed, ray_store = await run_into(tmp_path / "ray", RayEngine(), forged)
    assert written_files(tmp_path / "local") == written_files(tmp_path / "ray")
    assert relation_files_put(ray_store) == []
    salted = merged_relation_id(members, merged.name, salt=1)
    assert {local.relation_id_mapping[m] for m in members} == {salted}
    assert distributed.relation_id_mapping == local.relation_id_mapping
    assert distributed.relation_id_mapping[merged.relation_id] == merged.relation_id


async def test_a_worker_that_does_not_see_the_output_directory_writes_nothing(
    tmp_path: Path,
) -> None:
    """A worker on a machine without the run's directory (no marker there) leaves the
    writing to the driver; what a worker wrote the driver only books; a store workers
    cannot share is never offered."""
    writer = OutputWriter(LocalStore(tmp_path / "out"), "rel", ["a"], NoProgress())
    shared = writer.share()
    assert shared is not None and shared.reachable()
    elsewhere = SharedOutputs(str(tmp_path / "other"), "rel", shared.marker, shared.taken)
    assert not elsewhere.reachable()
    assert await writer.write(WrittenOutputs([((0,), "a", b"{}")])) == {"a": "a"}
    await writer.written()
    assert writer.finish().mapping == {"a": "a"}
    assert not shared.reachable()  # the marker goes with the run
    assert list((tmp_path / "out").iterdir()) == []  # nothing written by the driver
    assert OutputWriter(MemoryStore(), "rel", ["a"], NoProgress()).share() is None
