"""Where a run's work runs: in this process, or across a Ray cluster.

Chunks of whole blocks (the records of one canonical endpoint pair) are independent, so
they are the unit of distribution: ``relmerge.chunk.work_chunk`` runs a chunk's exact
stage, embedding and block decisions wherever the engine puts it; reading, the LLM
gateway, the cross-block report, the id mapping and all writing stay in the driver.
``figures`` turns the chunks' CPU seconds into the result's ``engine`` object.
``ray_engine`` is imported only when asked for: Ray is an optional extra.
"""

from typing import Any

from relmerge.engines.base import BlockEngine


def __getattr__(name: str) -> Any:
    # Imported when asked for: ``local`` imports the chunk's stages, which import ``base``.
    if name == "LocalEngine":
        from relmerge.engines.local import LocalEngine

        return LocalEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BlockEngine", "LocalEngine"]
