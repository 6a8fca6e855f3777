"""CPU seconds, measured in the process that spends them.

A run reports where its time went (``result["engine"]``): the driver's CPU (this process
and the helper processes it started, such as the embedding helper) apart from the
workers' (each Ray task measures its own process). Wall seconds cannot tell a busy
driver from a waiting one; CPU seconds can.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

from relmerge.wrapping import layers

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process (Linux ``/proc``); 0.0 where unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


@runtime_checkable
class HelperProcesses(Protocol):
    """A component that starts helper processes of its own (the default embedder's
    embedding helper) and says how much CPU they spent."""

    def helper_cpu_seconds(self) -> float: ...


def helper_cpu_seconds(component: object) -> float:
    """CPU of the helper processes behind ``component`` (its layers included, see
    ``relmerge.wrapping``): the embedding helper of the default embedder, for one."""
    return sum(
        float(layer.helper_cpu_seconds())
        for layer in layers(component)
        if isinstance(layer, HelperProcesses)
    )


class CpuMeter:
    """CPU seconds per stage of one process (plus its helpers', via ``helpers``: a
    component, the run's embedder, whose helper processes count as the driver's).

    ``time.process_time`` counts every thread of the process, so a stage measured while
    another runs on the same event loop takes that one's CPU too; the total is exact.
    """

    def __init__(self, helpers: object = None) -> None:
        self.helpers = [layer for layer in layers(helpers) if isinstance(layer, HelperProcesses)]
        self.stages: dict[str, float] = {}  # CPU seconds
        self.wall: dict[str, float] = {}  # wall seconds
        self._start = self._now()

    def _now(self) -> float:
        return time.process_time() + sum(float(h.helper_cpu_seconds()) for h in self.helpers)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started, wall = self._now(), time.perf_counter()
        try:
            yield
        finally:
            self.add(name, self._now() - started)
            self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - wall

    def add(self, name: str, seconds: float) -> None:
        self.stages[name] = self.stages.get(name, 0.0) + seconds

    def total(self) -> float:
        return self._now() - self._start
