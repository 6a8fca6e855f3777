"""The result's ``engine`` object: where a run's time went, and what a cluster would gain.

CPU seconds are measured in the process that spent them: the driver's (the ``relmerge
run`` process and its helper processes) by the driver, each worker task's by that task.
With them a user sees the bottleneck and can estimate a cluster: a run on W workers
takes about ``max(driver CPU, total CPU / W)`` (:func:`modelled_speedup`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from relmerge.cputime import CpuMeter

if TYPE_CHECKING:
    from relmerge.stages.chunk import ChunkResult

# Stage names of the chunk work, as the result's "seconds" has long named them.
_SECONDS_NAME = {"decide": "semantic"}


def modelled_speedup(driver_cpu_s: float, total_cpu_s: float, workers: int) -> float:
    """Speed-up over one process of a run on ``workers`` workers: total CPU over the
    longer of the driver's CPU (it works alone) and an even share of the total."""
    bound = max(driver_cpu_s, total_cpu_s / max(1, workers))
    return total_cpu_s / bound if bound > 0 else 1.0


class EngineFigures:
    """Adds up what chunk results say about where they ran and what they cost."""

    def __init__(self, name: str, in_process: bool) -> None:
        self.name = name
        self.local = in_process
        self.nodes: set[str] = set()
        self.worker_cpu: dict[str, float] = {}
        self.wall: dict[str, float] = {}  # wall seconds per stage of in-process chunk work
        self.chunks = 0
        self.texts_embedded = 0
        self.embedded_by: dict[str, int] = {}

    def add(self, result: ChunkResult) -> None:
        self.chunks += 1
        self.texts_embedded += result.texts_embedded
        for reason, count in result.embedded_by.items():
            self.embedded_by[reason] = self.embedded_by.get(reason, 0) + count
        if result.node:
            self.nodes.add(result.node)
        if self.local:  # the driver's own meter already counted the CPU
            for stage, seconds in result.wall.items():
                name = _SECONDS_NAME.get(stage, stage)
                self.wall[name] = self.wall.get(name, 0.0) + seconds
            return
        for stage, seconds in result.cpu.items():
            self.worker_cpu[stage] = self.worker_cpu.get(stage, 0.0) + seconds

    def figures(self, described: dict[str, Any], meter: CpuMeter, wall_s: float) -> dict[str, Any]:
        described = dict(described)
        for stage, seconds in described.pop("extra_worker_cpu", {}).items():
            self.worker_cpu[stage] = self.worker_cpu.get(stage, 0.0) + seconds
        driver = meter.total()
        workers = sum(self.worker_cpu.values())
        stages = {
            stage: {
                "driver_s": round(meter.stages.get(stage, 0.0), 3),
                "workers_s": round(self.worker_cpu.get(stage, 0.0), 3),
            }
            for stage in sorted(meter.stages.keys() | self.worker_cpu.keys())
        }
        total = driver + workers
        return {
            "name": self.name,
            **described,
            "nodes": sorted(self.nodes),
            "chunks": self.chunks,
            "driver_cpu_s": round(driver, 3),
            "worker_cpu_s": round(workers, 3),
            "driver_cpu_share": round(driver / total, 4) if total > 0 else 1.0,
            "wall_s": round(wall_s, 3),
            "texts_embedded": self.texts_embedded,
            "texts_embedded_by": dict(sorted(self.embedded_by.items())),
            "stages": stages,
        }
