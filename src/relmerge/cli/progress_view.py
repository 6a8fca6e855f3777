"""Progress of a run on stderr: live bars on a terminal, one line per phase otherwise.

Both implement :class:`relmerge.progress.Progress`. Each phase is counted in its unit
(see ``relmerge.progress``); a bar shows done / total, the rate where it tells something
(texts/s for the embedding) and the time left. A phase whose total is still 0 (no LLM
request sent yet) is not shown. When a phase ends, its time is the one the run says it
worked (``took``), else the time from its start to its end; a rate is done / that time.
``run``, ``import`` and ``export`` all draw their phases with :func:`progress_view`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, Task, TextColumn
from rich.text import Text

PHASES: dict[str, tuple[str, str]] = {  # phase -> (label, unit)
    "read": ("reading input", "bytes"),
    "load": ("reading input", "records"),
    "exact": ("exact stage", "groups"),
    "embed": ("embedding", "texts"),
    "semantic": ("semantic stage", "blocks"),
    "llm": ("LLM requests", "answered"),
    "write": ("writing", "relations"),
    "pairs": ("reading the store", "pairs"),  # relmerge merge-into
    # relmerge import / export
    "tables": ("reading tables", "tables"),
    "graph": ("reading the graph", "bytes"),
    "run": ("reading the run", "relations"),
    "import_rows": ("converting rows", "rows"),
    "import_edges": ("converting edges", "edges"),
    "export_rows": ("rewriting rows", "rows"),
    "export_edges": ("rewriting edges", "edges"),
    "records": ("writing", "records"),
    "files": ("writing", "files"),
    # relmerge lightrag dedupe / undo
    "write_edges": ("writing LightRAG edges", "edges"),
    "undo_edges": ("restoring LightRAG edges", "edges"),
    # relmerge graphiti dedupe / undo
    "write_graphiti_edges": ("writing Graphiti edges", "changes"),
    "undo_graphiti_edges": ("restoring Graphiti edges", "changes"),
}
_RATE_UNITS = {"embed": "texts/s"}


def _size(count: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{int(count)} B"


def amount(phase: str, done: float, total: float | None) -> str:
    """``done/total unit``, bytes in kB / MB."""
    unit = PHASES.get(phase, (phase, ""))[1]
    if unit == "bytes":
        return f"{_size(done)}/{_size(total or 0)}"
    shown = f"{int(done):,}/{int(total):,}" if total is not None else f"{int(done):,}/?"
    return f"{shown} {unit}"


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _took(task: Task) -> float:
    """An ended phase's seconds: those the run said it worked, else its bar's time."""
    took = task.fields.get("took")
    return float(took) if took is not None else float(task.elapsed or 0)


class _AmountColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        return Text(amount(task.fields["phase"], task.completed, task.total))


class _ExtraColumn(ProgressColumn):
    """The rate where it tells something; LLM retries and failures."""

    def render(self, task: Task) -> Text:
        phase = task.fields["phase"]
        parts = []
        speed = task.speed
        if task.fields.get("ended"):  # the rate over the time the phase worked
            seconds = _took(task)
            speed = task.completed / seconds if seconds else None
        if phase in _RATE_UNITS and speed:
            parts.append(f"{speed:,.0f} {_RATE_UNITS[phase]}")
        if phase == "llm":
            parts.append(f"{int(task.total or 0):,} sent")
            parts.extend(f"{value:,} {name}" for name, value in task.fields["counts"].items())
        return Text(" · ".join(parts), style="dim")


class _TimeColumn(ProgressColumn):
    """Time left while the phase runs (once the rate is known), time taken when done.
    LLM requests have no time left of their own (how many more will be sent is not known:
    the semantic stage's bar tells it): the time they have run so far."""

    max_refresh = 0.5

    def render(self, task: Task) -> Text:
        if task.fields.get("ended"):
            return Text(f"took {_clock(_took(task))}", style="green")
        if task.fields["phase"] == "llm":
            return Text(f"for {_clock(task.elapsed or 0)}")
        remaining = task.time_remaining
        return Text("eta " + (_clock(remaining) if remaining is not None else "-:--:--"))


class RichProgress:
    """Live bars (a terminal): one per phase, kept until the run's summary."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            _AmountColumn(),
            _TimeColumn(),
            _ExtraColumn(),
            console=console,
            transient=True,
        )
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def start(self, stage: str, total: int | None) -> None:
        label = PHASES.get(stage, (stage, ""))[0]
        self._tasks[stage] = self._progress.add_task(
            label, total=total, phase=stage, counts={}, visible=total != 0, took=None
        )

    def advance(self, stage: str, amount: int = 1) -> None:
        if stage in self._tasks and amount:
            self._progress.advance(self._tasks[stage], amount)

    def add_total(self, stage: str, amount: int) -> None:
        if stage not in self._tasks or not amount:
            return
        task = self._progress.tasks[self._index(stage)]
        total = max(int(task.total or 0) + amount, int(task.completed))
        self._progress.update(self._tasks[stage], total=total, visible=total > 0)

    def count(self, stage: str, name: str, amount: int = 1) -> None:
        if stage in self._tasks and amount:
            counts = self._progress.tasks[self._index(stage)].fields["counts"]
            counts[name] = counts.get(name, 0) + amount

    def took(self, stage: str, seconds: float) -> None:
        """The seconds the phase worked (told by the run before ``finish``)."""
        if stage in self._tasks:
            self._progress.update(self._tasks[stage], took=seconds)

    def finish(self, stage: str) -> None:
        if stage in self._tasks:
            task = self._progress.tasks[self._index(stage)]
            self._progress.update(self._tasks[stage], ended=True)
            self._progress.stop_task(task.id)

    def _index(self, stage: str) -> int:
        return next(i for i, t in enumerate(self._progress.tasks) if t.id == self._tasks[stage])


@dataclass
class _Phase:
    total: int | None
    started: float = field(default_factory=time.perf_counter)
    done: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    took: float | None = None  # the seconds it worked, when the run says so


class LineProgress:
    """One line per phase, when it ends (stderr is a file or a pipe: a log)."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._phases: dict[str, _Phase] = {}

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def start(self, stage: str, total: int | None) -> None:
        self._phases[stage] = _Phase(total)

    def advance(self, stage: str, amount: int = 1) -> None:
        if stage in self._phases:
            self._phases[stage].done += amount

    def add_total(self, stage: str, amount: int) -> None:
        if stage in self._phases:
            phase = self._phases[stage]
            phase.total = max((phase.total or 0) + amount, phase.done)

    def count(self, stage: str, name: str, amount: int = 1) -> None:
        if stage in self._phases:
            counts = self._phases[stage].counts
            counts[name] = counts.get(name, 0) + amount

    def took(self, stage: str, seconds: float) -> None:
        """The seconds the phase worked (told by the run before ``finish``)."""
        if stage in self._phases:
            self._phases[stage].took = seconds

    def finish(self, stage: str) -> None:
        phase = self._phases.pop(stage, None)
        if phase is None:
            return
        seconds = phase.took if phase.took is not None else time.perf_counter() - phase.started
        label = PHASES.get(stage, (stage, ""))[0]
        line = f"{label}: {amount(stage, phase.done, phase.total)} in {seconds:.1f} s"
        if stage in _RATE_UNITS and seconds > 0 and phase.done:
            line += f" ({phase.done / seconds:,.0f} {_RATE_UNITS[stage]})"
        if stage == "llm":
            extra = [f"{phase.total or 0:,} sent"]
            extra += [f"{value:,} {name}" for name, value in phase.counts.items()]
            line += f" ({', '.join(extra)})"
        self._console.print(line, highlight=False, soft_wrap=True)


def progress_view(console: Console) -> RichProgress | LineProgress:
    """Bars on a terminal, one line per phase otherwise (a log); a quiet console gets
    lines it does not print."""
    return RichProgress(console) if console.is_terminal else LineProgress(console)
