"""Whether the pipeline's own thread is busy with CPU work right now.

While one chunk is decided (Python, on the event loop's thread) the next one is embedded.
A helper thread of this process embedding at the same time would only compete with the
decisions for the interpreter lock and the core; the embedder leaves its work to its
helper process instead while :func:`main_thread_busy` is on (see ``use_embed._Helper``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0


@contextmanager
def main_thread_busy() -> Iterator[None]:
    """Mark the span of the pipeline's own CPU work (nested spans are fine)."""
    global _depth
    with _lock:
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1


def is_main_thread_busy() -> bool:
    return _depth > 0
