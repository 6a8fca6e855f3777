"""Progress reporting hooks: the pipeline calls them, the CLI draws them.

A run goes through phases, each counted in its own unit, and each knows its total before
it starts (or, where work is only known as it is found, grows it as it goes):

====================  ========================  ============================================
phase                 unit                      total
====================  ========================  ============================================
``read``              bytes of a local file     the file's size
``load``              records                   the records of an input read as a list
``exact``             exact-key groups          distinct (endpoints, name, type) keys
``embed``             texts                     first the valid records, then corrected
                                                chunk by chunk to the distinct texts
``semantic``          blocks of two or more     such blocks (endpoint pairs)
``llm``               requests answered         requests sent so far (grows as they are)
``write``             relations written         output relations of the chunks decided
                                                (``merge-into``: the rows of its batch)
``pairs``             endpoint pairs read       the pairs of a ``merge-into`` batch, whose
                                                stored relations it reads
====================  ========================  ============================================

Nothing here knows where the work runs: the semantic stage reports blocks as an engine
hands them back, whether decided in this process or by Ray workers, and LLM requests are
counted where every request passes (the driver's model,
:class:`relmerge.providers.progress.ProgressModel`).

A phase's time is the time it worked, not the time from its first news to the end of the
run: whoever works a phase also says when it starts and stops working
(:func:`working`; the LLM phase: while a request is in flight), and the run tells the
view those seconds (the optional hook ``took``) before it finishes the phase. A progress
object without these hooks times phases itself.

``relmerge import`` and ``relmerge export`` report their own phases the same way:

================  ====================  ====================================================
phase             unit                  total
================  ====================  ====================================================
``tables``        tables                the GraphRAG tables read (relationships, entities…)
``graph``         bytes                 the size of a LightRAG GraphML file
``run``           relations             the output relations of the run exported
``import_rows``   rows                  relationships rows converted into records
``import_edges``  edges                 GraphML edges converted into records
``export_rows``   rows                  relationships rows laid out after the run
``export_edges``  edges                 GraphML edges rewritten after the run
``records``       records               relations and entities written by an import
``files``         files                 files written into the exported copy
================  ====================  ====================================================
"""

from __future__ import annotations

from collections.abc import Iterator, Sized
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

PHASES = ("read", "load", "exact", "embed", "semantic", "llm", "write", "pairs")
CONVERT_PHASES = (
    "tables",
    "graph",
    "run",
    "import_rows",
    "import_edges",
    "export_rows",
    "export_edges",
    "records",
    "files",
)


@runtime_checkable
class Progress(Protocol):
    def start(self, stage: str, total: int | None) -> None: ...

    def advance(self, stage: str, amount: int = 1) -> None: ...

    def add_total(self, stage: str, amount: int) -> None:
        """The stage's total changes by ``amount`` (more work found, or an estimate
        corrected; may be negative)."""
        ...

    def count(self, stage: str, name: str, amount: int = 1) -> None:
        """A side counter shown with the stage (``retried`` for LLM requests)."""
        ...

    def finish(self, stage: str) -> None: ...


class NoProgress:
    """The default: report nothing."""

    def start(self, stage: str, total: int | None) -> None:
        pass

    def advance(self, stage: str, amount: int = 1) -> None:
        pass

    def add_total(self, stage: str, amount: int) -> None:
        pass

    def count(self, stage: str, name: str, amount: int = 1) -> None:
        pass

    def finish(self, stage: str) -> None:
        pass


@runtime_checkable
class TimedProgress(Protocol):
    """A progress that hears when a part of a phase's work starts and stops (the run's
    phases, a worker's record of its chunk): it times the phase by the work, not by
    its first and last news."""

    def working(self, stage: str, busy: bool) -> None: ...


@runtime_checkable
class WorkedProgress(Protocol):
    """A progress that takes seconds of a phase's work measured elsewhere (the chunks a
    worker process or a Ray task worked)."""

    def worked(self, stage: str, seconds: float) -> None: ...


@runtime_checkable
class PhaseTimes(Protocol):
    """A progress view that shows how long a phase worked: told ``took`` just before the
    phase's ``finish``. A view without it times phases itself."""

    def took(self, stage: str, seconds: float) -> None: ...


@runtime_checkable
class CountsBytes(Protocol):
    """An input that says how much of it is read (a local file): reading is shown in bytes."""

    total_bytes: int
    bytes_read: int


@runtime_checkable
class CountsRecords(Protocol):
    """An input that knows how many records it holds before they are read."""

    total_records: int


class _Partial(NoProgress):
    """A progress object written for fewer hooks (``start`` / ``advance`` / ``finish``):
    the hooks it has are called, the others do nothing. It is the caller's object, of no
    declared type, so its hooks are looked up by name."""

    def __init__(self, inner: object) -> None:
        self._inner = inner

    def start(self, stage: str, total: int | None) -> None:
        getattr(self._inner, "start", super().start)(stage, total)

    def advance(self, stage: str, amount: int = 1) -> None:
        getattr(self._inner, "advance", super().advance)(stage, amount)

    def add_total(self, stage: str, amount: int) -> None:
        getattr(self._inner, "add_total", super().add_total)(stage, amount)

    def count(self, stage: str, name: str, amount: int = 1) -> None:
        getattr(self._inner, "count", super().count)(stage, name, amount)

    def finish(self, stage: str) -> None:
        getattr(self._inner, "finish", super().finish)(stage)


def working(progress: object, stage: str, busy: bool) -> None:
    """Tell ``progress`` that a part of the work of ``stage`` starts (``busy``) or stops,
    if it listens (:class:`TimedProgress`: the run's phases do; a plain progress object
    need not)."""
    if isinstance(progress, TimedProgress):
        progress.working(stage, busy)


@contextmanager
def working_on(progress: object, stage: str) -> Iterator[None]:
    """The block is a part of the work of ``stage`` (see :func:`working`)."""
    working(progress, stage, True)
    try:
        yield
    finally:
        working(progress, stage, False)


def as_progress(progress: object | None) -> Progress:
    """``progress`` as a full :class:`Progress` (None: report nothing)."""
    if progress is None:
        return NoProgress()
    return progress if isinstance(progress, Progress) else _Partial(progress)


def input_size(raws: object) -> tuple[str, int | None]:
    """How reading the input is counted: ("read", its bytes) for an input that says how
    much of it is read (``total_bytes`` / ``bytes_read``: a local file), else ("load",
    its records when known)."""
    if isinstance(raws, CountsBytes) and isinstance(raws.total_bytes, int):
        return "read", raws.total_bytes
    if isinstance(raws, CountsRecords) and isinstance(raws.total_records, int):
        return "load", raws.total_records
    return "load", len(raws) if isinstance(raws, Sized) else None
