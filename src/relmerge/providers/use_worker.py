"""The helper process of :class:`~relmerge.providers.use_embed.UseEmbedder`.

Run as ``python -m relmerge.providers.use_worker``; it reads frames from stdin (8-byte
little-endian length, then a JSON array of texts) and answers each on stdout (8-byte row
count, then the rows as float32 bytes, 512 per row). It ends when stdin closes, so it
never outlives the process that started it. It imports nothing of the caller's program.
Ctrl-C in a terminal reaches the whole process group: the helper ignores it and leaves the
interruption to the process that started it, which ends it.
"""

from __future__ import annotations

import signal
import sys
from typing import BinaryIO

import numpy as np
import orjson

HEADER = 8


def read_frame(stream: BinaryIO) -> bytes | None:
    """One frame's payload, or None at a clean end of the stream."""
    header = stream.read(HEADER)
    if len(header) < HEADER:
        return None
    size = int.from_bytes(header, "little")
    payload = stream.read(size)
    if len(payload) < size:
        return None
    return payload


def write_frame(stream: BinaryIO, size: int, payload: bytes) -> None:
    stream.write(size.to_bytes(HEADER, "little"))
    stream.write(payload)
    stream.flush()


def serve(source: BinaryIO, sink: BinaryIO) -> None:
    from relmerge.providers.use_embed import encode_rows

    while (payload := read_frame(source)) is not None:
        texts = orjson.loads(payload)
        rows = np.ascontiguousarray(encode_rows(texts), dtype=np.float32)
        write_frame(sink, len(texts), rows.tobytes())


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    serve(sys.stdin.buffer, sys.stdout.buffer)
