"""Does ``--engine ray`` scale? Local against Ray on a two-node cluster, same batches.

For each size, a synthetic batch (``bench/synthetic.generate_semantic``) is run twice by
``relmerge run --llm none --no-cache`` (default embedder) in a child process: once with
``--engine local``, once with ``--engine ray`` on a two-node Ray cluster started here
(``ray start`` of one CPU per node, loopback, own temp dirs; stopped at the end). From
the result's ``engine`` object it prints: wall time, the driver's share of the run's
CPU, CPU per relation (Ray's total against local's: is the work moved, or inflated?),
texts embedded per worker-second, and the modelled speed-up at 8, 32 and 128 workers,
``total CPU / max(driver CPU, total CPU / workers)``, from the Ray run's measured shares.
Both runs use the same ``records_per_chunk`` (default 10,000 here: a Ray run needs a few
chunks per worker to keep them all busy) and so write the same outputs.

    PYTHONPATH=. .venv/bin/python bench/ray_scale.py --sizes 50000 200000

Targets (at 50,000 and 200,000): driver CPU <= 15% of the total; Ray CPU per relation
<= 1.2 x local's; on a 2-CPU machine, Ray wall time <= 1.25 x local's. The Ray workers
write the relation files into the run's directory themselves (``engines.outputs``): the
summary line says what writing cost the driver and the workers. The load average is
printed with the figures: on a shared machine absolute times are noisy, ratios measured
in the same run less so.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from tests.support.ray_cluster import RayCluster  # noqa: E402

from relmerge.engines.figures import modelled_speedup  # noqa: E402
from synthetic import generate_semantic  # noqa: E402

TARGET_DRIVER_SHARE = 0.15
TARGET_CPU_RATIO = 1.2
TARGET_WALL_RATIO = 1.25


def _outputs_digest(out: Path) -> str:
    """One digest of the relation files, the id mapping and the logs."""
    digest = hashlib.sha256()
    for path in sorted(out.rglob("*")):
        if path.is_file() and ".relmerge" not in path.parts and "result" not in path.name:
            digest.update(path.relative_to(out).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _run(path: Path, out: Path, config: Path, env: dict[str, str], *more: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "relmerge", "run", str(path), "--output", str(out)]
    command += ["--llm", "none", "--no-cache", "--config", str(config), "-q", *more]
    load = os.getloadavg()[0]
    started = time.perf_counter()
    subprocess.run(command, check=True, env=env)
    wall = time.perf_counter() - started
    result: dict[str, Any] = orjson.loads((out / "deduplicate_relations_result.json").read_bytes())
    engine_figures: dict[str, Any] = result["engine"]
    return {
        **engine_figures,  # its wall_s: the run's, from reading the input to the result
        "process_wall_s": round(wall, 1),  # the child process's, start-up included
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "outputs": _outputs_digest(out),
        "output_relations": result["output_relation_count"],
    }


def _embed_rate(figures: dict[str, Any]) -> float:
    seconds = figures["stages"].get("embed", {})
    spent = seconds.get("workers_s", 0.0) or seconds.get("driver_s", 0.0)
    return figures["texts_embedded"] / spent if spent else 0.0


def _report(size: int, local: dict[str, Any], ray: dict[str, Any]) -> dict[str, Any]:
    local_cpu = local["driver_cpu_s"] + local["worker_cpu_s"]
    ray_cpu = ray["driver_cpu_s"] + ray["worker_cpu_s"]
    figures = {
        "relations": size,
        "chunks": ray["chunks"],
        "local_wall_s": local["wall_s"],
        "ray_wall_s": ray["wall_s"],
        "local_process_wall_s": local["process_wall_s"],
        "ray_process_wall_s": ray["process_wall_s"],
        "wall_ratio": round(ray["wall_s"] / local["wall_s"], 3),
        "ray_driver_cpu_s": ray["driver_cpu_s"],
        "ray_worker_cpu_s": ray["worker_cpu_s"],
        "ray_driver_share": round(ray["driver_cpu_s"] / ray_cpu, 4),
        "ray_write_s": {  # the relation files: written by the workers into a local OUT
            side: ray["stages"].get("write", {}).get(f"{side}_s", 0.0)
            for side in ("driver", "workers")
        },
        "local_cpu_per_relation_ms": round(1000 * local_cpu / size, 3),
        "ray_cpu_per_relation_ms": round(1000 * ray_cpu / size, 3),
        "cpu_ratio": round(ray_cpu / local_cpu, 3),
        "texts_per_worker_second": round(_embed_rate(ray), 1),
        "local_texts_per_cpu_second": round(_embed_rate(local), 1),
        "modelled_speedup": {
            workers: round(modelled_speedup(ray["driver_cpu_s"], ray_cpu, workers), 1)
            for workers in (8, 32, 128)
        },
        "nodes": len(ray["nodes"]),
        "identical_outputs": local["outputs"] == ray["outputs"],
        "load": [local["load_before"], local["load_after"], ray["load_before"], ray["load_after"]],
        "stages": {"local": local["stages"], "ray": ray["stages"]},
    }
    print(json.dumps(figures), flush=True)
    ok = (
        figures["ray_driver_share"] <= TARGET_DRIVER_SHARE,
        figures["cpu_ratio"] <= TARGET_CPU_RATIO,
        figures["wall_ratio"] <= TARGET_WALL_RATIO,
    )
    print(
        f"{size:,}: local {local['wall_s']} s, ray {ray['wall_s']} s "
        f"(x{figures['wall_ratio']}, target <= {TARGET_WALL_RATIO}); driver share "
        f"{figures['ray_driver_share']:.1%} (target <= {TARGET_DRIVER_SHARE:.0%}; writing: "
        f"driver {figures['ray_write_s']['driver']} s, workers {figures['ray_write_s']['workers']}"
        f" s); CPU/relation "
        f"ray/local x{figures['cpu_ratio']} (target <= {TARGET_CPU_RATIO}); "
        f"{figures['texts_per_worker_second']} texts per worker-second; modelled speed-up "
        f"{figures['modelled_speedup']}; targets {'met' if all(ok) else 'NOT met'}; "
        f"load average {figures['load']}",
        flush=True,
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50_000, 200_000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--records-per-chunk", type=int, default=10_000)
    parser.add_argument("--embedding", choices=["use", "hash"], default="use")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="relmerge-ray-scale-") as tmp, RayCluster(1) as cluster:
        env = RayCluster.env()
        config = Path(tmp) / "relmerge.toml"
        config.write_text(f"records_per_chunk = {args.records_per_chunk}\n")
        print(f"cluster {cluster.address}: 2 nodes x 1 CPU; load {os.getloadavg()}", flush=True)
        for size in args.sizes:
            records, _ = generate_semantic(size, args.seed)
            path = Path(tmp) / f"relations-{size}.jsonl"
            path.write_bytes(b"".join(orjson.dumps(record) + b"\n" for record in records))
            del records
            embedding = ("--embedding", args.embedding)
            local = _run(path, Path(tmp) / f"local-{size}", config, env, *embedding)
            ray = _run(
                path, Path(tmp) / f"ray-{size}", config, env, *embedding, "--engine", "ray",
                "--ray-address", cluster.address,
            )  # fmt: skip
            _report(size, local, ray)


if __name__ == "__main__":
    main()
