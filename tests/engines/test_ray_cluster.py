"""``relmerge run --engine ray`` on a real two-node Ray cluster started here.

Two ``ray start`` nodes of one CPU each (own temp dirs and ports, loopback only), the
CLI as a separate driver process joining with ``--ray-address``: the outputs are those
of ``--engine local`` byte for byte, chunks ran on both nodes, the default embedder
worked on the workers, and the loopback LLM server saw exactly the requests the driver
counted (workers reach the LLM only through the driver's gateway).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.dev_cli import DEV, dev_run_args, written_files
from tests.support.gold_judge import dev_gold_judge, gold_task_handler
from tests.support.llm_server import LLMServer
from tests.support.ray_cluster import RayCluster

needs_dev = pytest.mark.skipif(not DEV.is_dir(), reason="shared dev set not present")
RESULT = "deduplicate_relations_result.json"


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    with RayCluster(cpus=1) as started:
        yield started


def _run(out: Path, base_url: str, config: Path, *engine: str) -> dict[str, Any]:
    env = RayCluster.env()
    args = dev_run_args(out, base_url, 4, "--embedding", "use", "--config", str(config))
    done = subprocess.run(
        [sys.executable, "-m", "relmerge", *args, *engine],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = orjson.loads((out / RESULT).read_bytes())
    return result


def _files(out: Path) -> dict[str, bytes]:
    return {path: data for path, data in written_files(out).items() if path != RESULT}


@needs_dev
def test_two_nodes_write_the_local_outputs(cluster: RayCluster, tmp_path: Path) -> None:
    config = tmp_path / "relmerge.toml"
    config.write_text("records_per_chunk = 120\n")  # several chunks: both nodes get work
    with LLMServer(handler=gold_task_handler(dev_gold_judge(DEV))) as server:
        local = _run(tmp_path / "local", server.base_url, config, "--workers", "0")
        local_requests = len(server.group_requests)
        distributed = _run(
            tmp_path / "ray", server.base_url, config, "--engine", "ray",
            "--ray-address", cluster.address,
        )  # fmt: skip
        ray_requests = len(server.group_requests) - local_requests
        preflights = len(server.requests) - len(server.group_requests)

    assert _files(tmp_path / "local") == _files(tmp_path / "ray")
    engine = distributed.pop("engine")
    for result in (local, distributed):
        result.pop("seconds")
    local_engine = local.pop("engine")
    # The verdict is taken in plan order, on the same answers; a chunk a node had under
    # way when the model was trusted may carry canaries a local run no longer sends.
    verdict = ("verdict", "decided_after", "rule", "evidence", "distrusted", "reason")
    canaries = [result.pop("canaries") for result in (local, distributed)]
    assert [{k: c[k] for k in verdict} for c in canaries] == [
        {k: canaries[0][k] for k in verdict}
    ] * 2
    assert canaries[0]["verdict"] == "trusted"
    for result in (local, distributed):
        result.pop("tokens")
        result.pop("cost")
    assert local == distributed
    assert local["chunk_count"] >= 4 and local["llm_requests"] > 0

    assert engine["name"] == "ray" and engine["workers"] == 2
    assert sorted(engine["nodes"]) == sorted(cluster.node_ids())
    assert engine["chunks"] == local["chunk_count"]
    assert engine["worker_cpu_s"] > 0 and engine["stages"]["embed"]["workers_s"] > 0
    assert engine["stages"]["embed"]["driver_s"] < engine["stages"]["embed"]["workers_s"]
    assert local_engine["worker_cpu_s"] == 0 and local_engine["nodes"] == []
    # Every request the server saw was sent and counted by the driver's model.
    assert ray_requests == distributed["llm_requests"] == local_requests
    assert preflights == local["preflight_requests"] + distributed["preflight_requests"] == 2
