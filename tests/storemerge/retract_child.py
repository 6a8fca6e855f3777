"""A child process that retracts a document from a store, for the crash test.

``python -m tests.storemerge.retract_child URL DOC [--pause-at K]`` retracts DOC; with
``--pause-at K`` it says ``{"event": "paused"}`` at point K and waits there to be killed:
0 before anything is read, 1 inside the batch's write transaction (its rebuilt relations
written, not committed), -1 once committed.
"""

from __future__ import annotations

import argparse
import asyncio

from relmerge.graphstore import open_graph_store
from relmerge.run.retract import retract
from tests.storemerge.child import pause, say


async def main(url: str, document: str, pause_at: int | None) -> None:
    if pause_at == 0:
        pause(0)

    def on_write(_: int) -> None:
        if pause_at == 1:
            pause(1)

    async with open_graph_store(url) as store:
        result = await retract(store, [document], progress=on_write)
        say("done", status=result.status, batch_id=result.batch_id)
        if pause_at == -1:
            pause(-1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("document")
    parser.add_argument("--pause-at", type=int, default=None)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.url, arguments.document, arguments.pause_at))
