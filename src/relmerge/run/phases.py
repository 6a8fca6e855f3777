"""A run's clock and its progress by phase, as the chunks report it.

:class:`Clock` adds up the seconds of each stage for the result's ``seconds``;
:class:`Phases` turns what the chunks report, wherever they are worked, into the progress
the caller sees (``relmerge.progress``), each phase timed by when it worked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from relmerge.progress import NoProgress, PhaseTimes, Progress


class Clock:
    """Seconds per stage. Work overlaps (a chunk's files are written while the next one is
    worked; Ray workers work chunks side by side), so the stages' seconds can add up to
    more than the total."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._start = time.perf_counter()
        self._last = self._start

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self._add(stage, now - self._last)
        self._last = now

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self._add(stage, time.perf_counter() - started)

    def _add(self, stage: str, seconds: float) -> None:
        self.seconds[stage] = round(self.seconds.get(stage, 0.0) + seconds, 4)

    def elapsed(self) -> float:
        return time.perf_counter() - self._start

    def total(self, more: dict[str, float] | None = None) -> dict[str, float]:
        """Seconds per stage, with ``more`` (stage seconds measured elsewhere) added."""
        for stage, seconds in (more or {}).items():
            self._add(stage, seconds)
        return {**self.seconds, "total": round(self.elapsed(), 4)}


@dataclass
class PhaseTime:
    """When a phase worked: the intervals during which some part of it was working (any
    chunk in it, any LLM request in flight), told by ``working``; seconds measured
    elsewhere (a Ray worker's chunk) are added whole."""

    first: float
    last: float
    active: int = 0
    since: float = 0.0
    seconds: float = 0.0
    told: bool = False  # some part said when it worked: the seconds are those

    def worked(self, now: float) -> float:
        if not self.told:
            return self.last - self.first
        return self.seconds + (now - self.since if self.active else 0.0)


class Phases(NoProgress):
    """The run's progress as the chunks report it: each phase is shown from its first
    news (whatever the chunk, wherever it is worked), starting from the total known for
    it. The exact, embedding and semantic phases end as soon as their work is complete
    (their totals are final once every chunk has corrected them, so done = total only
    at the very end), the others when the run ends them. Each phase's closing line gets
    the seconds it worked (:class:`PhaseTime`), not those of the phases after it."""

    ENDS_AT_TOTAL = ("exact", "embed", "semantic")

    def __init__(
        self,
        progress: Progress,
        totals: Mapping[str, int],
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.progress = progress
        self.totals = dict(totals)
        self.done: dict[str, int] = {}
        self.started: list[str] = []
        self.ended: set[str] = set()
        self.times: dict[str, PhaseTime] = {}
        self._clock = clock

    def _news(self, phase: str) -> bool:
        """Begin ``phase`` at its first news; False once it has ended (news ignored)."""
        if phase in self.ended:
            return False
        now = self._clock()
        if phase not in self.started:
            self.started.append(phase)
            self.times[phase] = PhaseTime(now, now)
            self.progress.start(phase, self.totals.get(phase, 0))
        self.times[phase].last = now
        return True

    def advance(self, stage: str, amount: int = 1) -> None:
        if self._news(stage):
            self.done[stage] = self.done.get(stage, 0) + amount
            self.progress.advance(stage, amount)
            self._end_if_complete(stage)

    def add_total(self, stage: str, amount: int) -> None:
        if self._news(stage):
            self.totals[stage] = self.totals.get(stage, 0) + amount
            self.progress.add_total(stage, amount)

    def count(self, stage: str, name: str, amount: int = 1) -> None:
        if self._news(stage):
            self.progress.count(stage, name, amount)

    def working(self, stage: str, busy: bool) -> None:
        """A part of ``stage``'s work starts or stops (a chunk, an LLM request, a write)."""
        if not self._news(stage):
            return
        time_ = self.times[stage]
        now, time_.told = time_.last, True
        if busy:
            if time_.active == 0:
                time_.since = now
            time_.active += 1
        elif time_.active > 0:
            time_.active -= 1
            if time_.active == 0:
                time_.seconds += now - time_.since
            self._end_if_complete(stage)

    def worked(self, stage: str, seconds: float) -> None:
        """``seconds`` of ``stage``'s work measured elsewhere (a Ray worker's chunk)."""
        if self._news(stage):
            self.times[stage].told = True
            self.times[stage].seconds += seconds

    def _end_if_complete(self, stage: str) -> None:
        if (
            stage in self.ENDS_AT_TOTAL
            and self.done.get(stage, 0) >= self.totals.get(stage, 0)
            and self.times[stage].active == 0
        ):
            self.end(stage)

    def end(self, *phases: str) -> None:
        for phase in phases:
            if phase in self.started:
                self.started.remove(phase)
                self.ended.add(phase)
                if isinstance(self.progress, PhaseTimes):
                    self.progress.took(phase, self.times[phase].worked(self._clock()))
                self.progress.finish(phase)
