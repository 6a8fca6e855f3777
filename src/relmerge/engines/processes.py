"""The local engine's workers: a run's chunks worked side by side by worker processes.

One process cannot keep two cores busy with a run: its reading, exact stage, features
and decisions hold one core while only the embedding uses more. Worker processes
(:mod:`relmerge.engines.process_worker`, started with ``python -m``, so nothing of the
caller's program is imported again) each work whole chunks, as Ray tasks do, with the
default embedder loaded once per process and one BLAS thread; the driver reads, plans,
serves the LLM (one concurrency limit, budget, cache and count, through
:func:`~relmerge.engines.gateway.answer`) and the embedding desk, and writes the results
in plan order, so the outputs are a one-process run's. At most ``window`` chunks are
read and not yet written, and each worker holds at most two (one worked, one waiting), so
a worker never waits for the driver to hand it the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import sys
import time
import weakref
from collections import deque
from collections.abc import AsyncGenerator, Iterator, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from relmerge.cputime import process_cpu_seconds
from relmerge.decide.retry import report_unreachable
from relmerge.engines.base import ChunkRun, collect, embed_driver_texts
from relmerge.engines.gateway import CanaryNote, Outcome, answer, raise_failure
from relmerge.engines.process_worker import HEADER, frame
from relmerge.engines.workers import DeskModel, worker_setup
from relmerge.errors import ConfigError, WorkerDied
from relmerge.progress import working
from relmerge.providers.base import layers
from relmerge.providers.cached import CachingModel, persistent_layer
from relmerge.providers.embedding import Vectors
from relmerge.stages.chunk import ChunkResult, ChunkTask, RecordedProgress

_PER_WORKER = 2  # chunks a worker holds at once: the one it works and the next


class _Worker:
    """The driver's end of one worker process."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.held: set[tuple[str, int]] = set()  # jobs sent, not yet answered
        self.chunks = 0  # chunks held
        self.reader: asyncio.Task[None] | None = None

    async def send(self, message: Any) -> None:
        await self.send_frame(frame(message))

    async def send_frame(self, data: bytes) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(data)
        await stdin.drain()


class ProcessEngine:
    """``workers`` worker processes on this machine work the chunks (see the module).

    Started on the run's first chunk or embedding and ended by :meth:`close`; the same
    engine can serve later runs. ``window``: chunks read and not yet written (default:
    three per worker).
    """

    name = "local"
    in_process = False

    def __init__(self, workers: int, window: int | None = None) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers
        self.window = window or 3 * workers
        self._pool: list[_Worker] = []
        self._run: ChunkRun | None = None
        self._futures: dict[tuple[str, int], asyncio.Future[Any]] = {}
        self._limits: dict[str, asyncio.Semaphore] = {}
        self._answering: set[asyncio.Task[None]] = set()
        self._waiting: deque[ChunkTask] = deque()  # read, not yet handed to a worker
        self._errors: list[BaseException] = []
        self._next_job = 0
        self._closing = False
        self._models: dict[str, Any] = {}
        self.extra_worker_cpu: dict[str, float] = {}
        self._chunk_cpu = 0.0  # CPU the workers reported for their jobs
        _ENGINES.add(self)

    def describe(self) -> dict[str, Any]:
        return {"workers": self.workers, "extra_worker_cpu": dict(self.extra_worker_cpu)}

    # -- the processes --------------------------------------------------------------

    async def _start(self, run: ChunkRun) -> int:
        """Start the workers (once per run); how many there are."""
        if self._pool:
            return len(self._pool)
        self._run, self._closing = run, False
        setup = worker_setup(run)
        try:
            setup_frame = frame(("setup", setup))  # once: the entities can be many
        except Exception as error:  # an object of the caller's (answer memory, entities)
            raise ConfigError(
                f"the run's settings cannot be sent to worker processes ({error}); "
                "work in one process: --workers 0, or engine=LocalEngine()"
            ) from error
        desk = DeskModel(run.embedder, persistent_layer(run.embedder))
        self._models = {"llm": run.model, "desk": desk}
        self._limits = {
            "llm": asyncio.Semaphore(run.settings.config.concurrency),
            "desk": asyncio.Semaphore(4),
        }
        package_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        env["OMP_NUM_THREADS"] = env["OPENBLAS_NUM_THREADS"] = "1"
        for _ in range(self.workers):
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "relmerge.engines.process_worker",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                env=env,
            )
            worker = _Worker(process)
            worker.reader = asyncio.create_task(self._read(worker))
            self._pool.append(worker)
            await worker.send_frame(setup_frame)
        return len(self._pool)

    async def close(self) -> None:
        """Let the workers end (their CPU outside the jobs is counted first)."""
        pool, self._pool = self._pool, []
        self._closing = True
        if pool:
            total = sum(process_cpu_seconds(w.process.pid) for w in pool)
            other = max(0.0, total - self._chunk_cpu)
            self.extra_worker_cpu["start"] = self.extra_worker_cpu.get("start", 0.0) + other
        for worker in pool:
            if worker.process.stdin is not None:
                worker.process.stdin.close()
        for worker in pool:
            try:
                await asyncio.wait_for(worker.process.wait(), 10)
            except TimeoutError:
                worker.process.kill()
                await worker.process.wait()
            if worker.reader is not None:
                worker.reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await worker.reader
        for task in list(self._answering):
            task.cancel()
        for future in self._futures.values():  # failed with a worker nobody waited for
            if future.done() and not future.cancelled():
                future.exception()
        self._futures.clear()
        self._waiting.clear()
        self._chunk_cpu = 0.0
        if self._errors:
            error, self._errors = self._errors[0], []
            raise error

    def kill(self) -> None:
        """End every worker now (an interrupted run)."""
        self._closing = True
        for worker in self._pool:
            if worker.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    worker.process.kill()
        # asyncio's child watcher reaps them (a thread per process, even once the loop is
        # closed): wait for that, so that none is left a zombie when this process exits.
        deadline = time.monotonic() + 5
        pids = [worker.process.pid for worker in self._pool]
        while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.01)

    # -- messages from the workers --------------------------------------------------

    async def _read(self, worker: _Worker) -> None:
        stdout = worker.process.stdout
        assert stdout is not None
        try:
            while True:
                header = await stdout.readexactly(HEADER)
                message = pickle.loads(await stdout.readexactly(int.from_bytes(header, "little")))
                self._receive(worker, message)
        except asyncio.IncompleteReadError:
            pass
        if self._closing:
            return
        code = await worker.process.wait()
        cached = self._run is not None and any(
            isinstance(layer, CachingModel) for layer in layers(self._run.model)
        )
        died = WorkerDied(worker.process.pid, code, cached)
        for key in worker.held:
            future = self._futures.get(key)
            if future is not None and not future.done():
                future.set_exception(died)

    def _receive(self, worker: _Worker, message: Any) -> None:
        kind = message[0]
        if kind == "ask":
            task = asyncio.create_task(self._answer(worker, *message[1:]))
            self._answering.add(task)
            task.add_done_callback(self._answering.discard)
        elif kind == "progress":
            assert self._run is not None
            sent = RecordedProgress()
            sent.advanced, sent.totals = message[1], message[2]
            sent.replay(self._run.progress)
        elif kind == "working":
            assert self._run is not None
            working(self._run.progress, message[1], message[2])
        elif kind == "unreachable":
            assert self._run is not None
            report_unreachable(self._run.model)
        elif kind == "done":
            key = ("chunk", message[1])
            worker.chunks -= 1
            self._land(worker, key, message[2:])
            self._dispatch()
        elif kind == "embedded":
            self._land(worker, ("embed", message[1]), message[2:])

    async def _landed(self, key: tuple[str, int]) -> Any:
        """What a job sent back (the future stays findable until then: a worker's
        answer, or its death, is delivered through it)."""
        try:
            return await self._futures[key]
        finally:
            del self._futures[key]

    def _land(self, worker: _Worker, key: tuple[str, int], value: Any) -> None:
        worker.held.discard(key)
        future = self._futures.get(key)
        if future is not None and not future.done():
            future.set_result(value)

    async def _answer(self, worker: _Worker, request_id: int, door: str, request: Any) -> None:
        # A canary note waits for no request: the verdict hears it at once.
        limit = self._limits[door] if not isinstance(request, CanaryNote) else nullcontext()
        async with limit:
            outcome = await answer(self._models[door], request, self._errors)
        if worker.process.returncode is None:
            with contextlib.suppress(ConnectionError):
                await worker.send(("answer", request_id, outcome))

    # -- chunks ---------------------------------------------------------------------

    def _dispatch(self) -> None:
        """Hand waiting chunks to the workers holding fewest, up to two each."""
        while self._waiting and self._pool and not self._closing:
            worker = min(self._pool, key=lambda w: w.chunks)
            if worker.chunks >= _PER_WORKER:
                return
            task = self._waiting.popleft()
            worker.chunks += 1
            worker.held.add(("chunk", task.number))
            sending = asyncio.create_task(self._send_chunk(worker, task))
            self._answering.add(sending)
            sending.add_done_callback(self._answering.discard)

    async def _send_chunk(self, worker: _Worker, task: ChunkTask) -> None:
        with contextlib.suppress(ConnectionError):  # gone: its reader fails what it held
            await worker.send(("chunk", task))

    async def run_chunks(
        self, run: ChunkRun, tasks: Iterator[ChunkTask]
    ) -> AsyncGenerator[ChunkResult, None]:
        await self._start(run)
        self._waiting.clear()
        order: deque[int] = deque()  # chunk numbers read and not yet yielded
        loop = asyncio.get_running_loop()
        exhausted = False
        while True:
            while not exhausted and len(order) < self.window:
                with run.meter.stage("submit"):  # read from the spool
                    task = next(tasks, None)
                if task is None:
                    exhausted = True
                    break
                self._futures[("chunk", task.number)] = loop.create_future()
                order.append(task.number)
                self._waiting.append(task)
                self._dispatch()
            if not order:
                return
            number = order.popleft()
            outcome, result = await self._landed(("chunk", number))
            with run.meter.stage("collect"):
                raise_failure(_as_failure(outcome))
                self._chunk_cpu += sum(result.cpu.values())
            yield collect(result, run)

    async def embed(self, run: ChunkRun, texts: Sequence[str]) -> Vectors:
        """The driver's own texts (the report's entity names), on the workers (see
        ``base.embed_driver_texts``)."""
        return await embed_driver_texts(
            run, texts, lambda: self._start(run), self._embed_on_workers
        )

    async def _embed_on_workers(self, parts: list[list[str]]) -> list[Vectors]:
        loop = asyncio.get_running_loop()
        keys = []
        for n, part in enumerate(parts):
            key = ("embed", self._next_job)
            self._next_job += 1
            self._futures[key] = loop.create_future()
            worker = self._pool[n % len(self._pool)]
            worker.held.add(key)
            await worker.send(("embed", key[1], part))
            keys.append(key)
        vectors = []
        for key in keys:
            outcome, part_vectors, cpu = await self._landed(key)
            raise_failure(_as_failure(outcome))
            self._chunk_cpu += cpu
            self.extra_worker_cpu["plan"] = self.extra_worker_cpu.get("plan", 0.0) + cpu
            vectors.append(part_vectors)
        return vectors


def _as_failure(outcome: Outcome) -> Outcome:
    """A worker's traceback (a bug, not an endpoint's failure) as the gateway's error."""
    kind, value = outcome
    if kind == "error":
        raise RuntimeError(f"a relmerge worker process failed:\n{value}")
    return outcome


# Every engine of this process, so that an interrupted run can end their workers.
_ENGINES: weakref.WeakSet[ProcessEngine] = weakref.WeakSet()


def stop_workers() -> None:
    """End every worker process this process started (idempotent)."""
    for engine in list(_ENGINES):
        engine.kill()
