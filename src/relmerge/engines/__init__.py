"""Where a run's work runs: in this process, or across a Ray cluster.

Chunks of whole blocks (the records of one canonical endpoint pair) are independent, so
they are the unit of distribution: ``relmerge.chunk.work_chunk`` runs a chunk's exact
stage, embedding and block decisions wherever the engine puts it; reading, the LLM
gateway, the cross-block report, the id mapping and all writing stay in the driver.
``figures`` turns the chunks' CPU seconds into the result's ``engine`` object.
``ray_engine`` is imported only when asked for: Ray is an optional extra.
"""

from relmerge.engines.base import BlockEngine, LocalEngine

__all__ = ["BlockEngine", "LocalEngine"]
