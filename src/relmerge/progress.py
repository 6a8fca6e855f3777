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
====================  ========================  ============================================

Nothing here knows where the work runs: the semantic stage reports blocks as an engine
hands them back, whether decided in this process or by Ray workers, and LLM requests are
counted where every request passes (the driver's model, :class:`ProgressModel`).

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
from typing import Any, Protocol

from relmerge.errors import ProviderError
from relmerge.providers.base import LanguageModel, LLMRequest, LLMResult

PHASES = ("read", "load", "exact", "embed", "semantic", "llm", "write")
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


class _Partial(NoProgress):
    """A progress object written for fewer hooks (``start`` / ``advance`` / ``finish``):
    the hooks it has are called, the others do nothing."""

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
    if it listens (the run's phases do; a plain progress object need not)."""
    hook = getattr(progress, "working", None)
    if callable(hook):
        hook(stage, busy)


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
    hooks = ("start", "advance", "add_total", "count", "finish")
    if all(callable(getattr(progress, hook, None)) for hook in hooks):
        return progress  # type: ignore[return-value]
    return _Partial(progress)


class ProgressModel:
    """Wraps the model that sends requests: each request grows the ``llm`` total when it
    is sent and advances it when answered; HTTP retries count as ``retried``."""

    def __init__(self, inner: LanguageModel, progress: Progress) -> None:
        self.inner = inner
        self.name = inner.name
        self.available = inner.available
        self.progress = progress

    def __getattr__(self, name: str) -> Any:  # cache_identity and the like
        return getattr(self.inner, name)

    async def invoke(self, request: LLMRequest) -> LLMResult:
        self.progress.add_total("llm", 1)
        try:
            with working_on(self.progress, "llm"):  # the LLM's time: a request in flight
                result = await self.inner.invoke(request)
        except ProviderError as error:
            self.progress.count("llm", "retried", max(0, error.attempts - 1))
            self.progress.count("llm", "failed")
            self.progress.advance("llm")
            raise
        self.progress.count("llm", "retried", max(0, result.attempts - 1))
        self.progress.advance("llm")
        return result


def input_size(raws: object) -> tuple[str, int | None]:
    """How reading the input is counted: ("read", its bytes) for an input that says how
    much of it is read (``total_bytes`` / ``bytes_read``: a local file), else ("load",
    its records when known)."""
    total = getattr(raws, "total_bytes", None)
    if isinstance(total, int) and hasattr(raws, "bytes_read"):
        return "read", total
    records = getattr(raws, "total_records", None)
    if isinstance(records, int):
        return "load", records
    return "load", len(raws) if isinstance(raws, Sized) else None
