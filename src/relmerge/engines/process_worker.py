"""A worker process of the local engine's workers (:mod:`relmerge.engines.processes`).

Run as ``python -m relmerge.engines.process_worker``. Messages are pickled frames (8-byte
little-endian length, then the pickle) on stdin from the driver, and to the driver on a
private copy of stdout: fd 1 itself then points at stderr, so a library that prints
cannot break a frame. Pickle is safe here: both ends are this package, on one machine,
over an anonymous pipe. The worker ends when stdin closes, so it never outlives the
driver, and ignores Ctrl-C (the driver ends it).

Driver → worker: ``("setup", WorkerSetup)``, ``("chunk", ChunkTask)``, ``("embed", job,
texts)``, ``("answer", request, Outcome)``. Worker → driver: ``("ask", request, door,
payload)`` (door ``llm`` or ``desk``), ``("unreachable",)``, ``("progress", advanced,
totals)`` (at most twice a second, for the driver's bars), ``("working", phase, busy)``
(a chunk starts or stops working a phase: the driver times phases), ``("done", number,
Outcome, ChunkResult | None)``, ``("embedded", job, Outcome, vectors, CPU seconds)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from typing import Any, BinaryIO

from relmerge.cputime import CpuMeter
from relmerge.engines.gateway import Outcome
from relmerge.engines.workers import WorkerSetup, work_on_worker, worker_base
from relmerge.stages.chunk import ChunkTask, RecordedProgress

HEADER = 8


def frame(message: Any) -> bytes:
    payload = pickle.dumps(message, protocol=5)
    return len(payload).to_bytes(HEADER, "little") + payload


def read_message(stream: BinaryIO) -> Any:
    """The next message, or None at the end of the stream."""
    header = stream.read(HEADER)
    if len(header) < HEADER:
        return None
    size = int.from_bytes(header, "little")
    payload = stream.read(size)
    return pickle.loads(payload) if len(payload) == size else None


class PipeDoor:
    """A :class:`~relmerge.engines.gateway.Door` to the driver over this process's pipe."""

    def __init__(self, worker: Worker, door: str) -> None:
        self.worker = worker
        self.door = door

    async def ask(self, request: Any) -> Outcome:
        return await self.worker.ask(self.door, request)

    def note_unreachable(self) -> None:
        self.worker.send(("unreachable",))


class SentProgress(RecordedProgress):
    """A chunk's progress, sent to the driver as it goes: a phase's first news at once
    (the driver's bars appear in the order the work reaches them), then at most every
    ``every`` seconds; what is left when the chunk ends travels with its result."""

    def __init__(self, worker: Worker, every: float = 0.5) -> None:
        super().__init__()
        self.worker = worker
        self.every = every
        self.sent = time.monotonic()
        self.seen: set[str] = set()

    def advance(self, stage: str, amount: int = 1) -> None:
        super().advance(stage, amount)
        self._send_if_due(stage)

    def add_total(self, stage: str, amount: int) -> None:
        super().add_total(stage, amount)
        self._send_if_due(stage)

    def working(self, stage: str, busy: bool) -> None:
        """Sent at once, after the news before it: the driver times the phase itself."""
        if self.advanced or self.totals:
            self.worker.send(("progress", self.advanced, self.totals))
            self.advanced, self.totals, self.sent = {}, {}, time.monotonic()
        self.seen.add(stage)
        self.worker.send(("working", stage, busy))

    def left(self) -> RecordedProgress:
        """What was not sent yet, as a plain value for the chunk's result."""
        left = RecordedProgress()
        left.advanced, left.totals = self.advanced, self.totals
        return left

    def _send_if_due(self, stage: str) -> None:
        now = time.monotonic()
        if stage not in self.seen or now - self.sent >= self.every:
            self.seen.add(stage)
            self.worker.send(("progress", self.advanced, self.totals))
            self.advanced, self.totals, self.sent = {}, {}, now


class Worker:
    """Works the driver's jobs one after the other on one event loop; answers to its
    questions arrive on the reader thread while a job awaits them."""

    def __init__(self, sink: int) -> None:
        self.sink = sink
        self.loop = asyncio.get_running_loop()
        self.jobs: asyncio.Queue[Any] = asyncio.Queue()
        self.waiting: dict[int, asyncio.Future[Outcome]] = {}
        self.next_request = 0
        self.setup: WorkerSetup | None = None

    def send(self, message: Any) -> None:
        data = memoryview(frame(message))
        while data:
            data = data[os.write(self.sink, data) :]

    async def ask(self, door: str, request: Any) -> Outcome:
        request_id = self.next_request
        self.next_request += 1
        answer: asyncio.Future[Outcome] = self.loop.create_future()
        self.waiting[request_id] = answer
        self.send(("ask", request_id, door, request))
        return await answer

    def receive(self, message: Any) -> None:
        if message[0] == "answer":
            answer = self.waiting.pop(message[1], None)
            if answer is not None and not answer.done():
                answer.set_result(message[2])
        else:
            self.jobs.put_nowait(message)

    async def serve(self) -> None:
        while True:
            await self.job(await self.jobs.get())

    async def job(self, message: Any) -> None:
        kind = message[0]
        if kind == "setup":
            self.setup = message[1]
        elif kind == "chunk":
            number = message[1].number
            outcome, result = await self.work(message[1])
            del message  # the chunk's relations, before the next chunk
            try:
                self.send(("done", number, outcome, result))
            except Exception:  # a result that cannot travel: a bug, said as one
                self.send(("done", number, ("error", traceback.format_exc()), None))
            del result
            give_back_memory()
        elif kind == "embed":
            self.send(("embedded", message[1], *await self.embed(message[2])))

    async def work(self, task: ChunkTask) -> tuple[Outcome, Any]:
        setup = self.setup
        assert setup is not None  # the driver sends it first
        progress = SentProgress(self)
        try:
            outcome, result = await work_on_worker(
                task, setup, PipeDoor(self, "llm"), PipeDoor(self, "desk"), progress
            )
        except Exception:  # a bug: the driver raises it with this traceback
            return ("error", traceback.format_exc()), None
        if result is not None:
            result.progress = progress.left()
        return outcome, result

    async def embed(self, texts: list[str]) -> tuple[Outcome, Any, float]:
        setup = self.setup
        assert setup is not None and setup.recipe is not None  # the driver asks only then
        meter = CpuMeter()
        try:
            with meter.stage("embed"):
                vectors = await worker_base(setup.recipe).embed(texts)
        except Exception:
            return ("error", traceback.format_exc()), None, meter.total()
        return ("ok", None), vectors, meter.total()


def give_back_memory() -> None:
    """Return a worked chunk's freed memory to the system: the allocator keeps it
    otherwise, and each worker would hold its largest chunk's peak for the whole run."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # glibc only
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _read(source: BinaryIO, worker: Worker) -> None:
    """The reader thread: hands each message to the loop; at the end of stdin (the driver
    is done or gone) the process ends, whatever it was doing."""
    while (message := read_message(source)) is not None:
        worker.loop.call_soon_threadsafe(worker.receive, message)
    os._exit(0)


async def main() -> None:
    sink = os.dup(1)
    os.dup2(2, 1)  # print() and friends go to stderr, never into a frame
    worker = Worker(sink)
    threading.Thread(target=_read, args=(sys.stdin.buffer, worker), daemon=True).start()
    await worker.serve()


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        asyncio.run(main())
    except BaseException:  # the driver sees the pipe close and says which worker ended
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
