"""The result's ``engine`` object: CPU split, stages and the modelled speed-up."""

from __future__ import annotations

import pytest

from relmerge.cputime import CpuMeter, helper_cpu_seconds
from relmerge.engines.figures import EngineFigures, modelled_speedup
from relmerge.stages.chunk import ChunkResult


def test_modelled_speedup_is_bound_by_the_driver() -> None:
    # 10 s of driver CPU in 100 s: never more than 10x, whatever the workers.
    assert modelled_speedup(10, 100, 2) == pytest.approx(2.0)
    assert modelled_speedup(10, 100, 8) == pytest.approx(100 / 12.5)
    assert modelled_speedup(10, 100, 128) == pytest.approx(10.0)
    assert modelled_speedup(0, 0, 8) == 1.0


def test_worker_cpu_is_summed_per_stage_and_nodes_collected() -> None:
    figures = EngineFigures("ray", in_process=False)
    for node, embed in (("a", 3.0), ("b", 5.0), ("a", 1.0)):
        figures.add(ChunkResult(0, cpu={"embed": embed, "decide": 1.0}, node=node))
    meter = CpuMeter()
    meter.add("write", 0.5)
    shown = figures.figures({"workers": 2, "extra_worker_cpu": {"plan": 2.0}}, meter, 7.0)
    assert shown["nodes"] == ["a", "b"] and shown["chunks"] == 3 and shown["workers"] == 2
    assert shown["worker_cpu_s"] == pytest.approx(14.0)
    assert shown["stages"]["embed"] == {"driver_s": 0.0, "workers_s": 9.0}
    assert shown["stages"]["plan"]["workers_s"] == 2.0
    assert shown["stages"]["write"]["driver_s"] == 0.5
    assert 0 <= shown["driver_cpu_share"] < 0.5  # the driver measured itself: nearly idle


def test_local_chunks_count_as_driver_cpu() -> None:
    figures = EngineFigures("local", in_process=True)
    figures.add(ChunkResult(0, cpu={"embed": 3.0}, wall={"embed": 2.0, "decide": 1.0}))
    shown = figures.figures({"workers": 0}, CpuMeter(), 3.0)
    assert shown["worker_cpu_s"] == 0 and figures.wall == {"embed": 2.0, "semantic": 1.0}


def test_helper_cpu_is_found_through_wrappers() -> None:
    class Helper:
        def helper_cpu_seconds(self) -> float:
            return 2.5

    class Wrapper:
        def __init__(self, inner: object) -> None:
            self.inner = inner

    assert helper_cpu_seconds(Wrapper(Wrapper(Helper()))) == 2.5
    assert helper_cpu_seconds(None) == 0.0
