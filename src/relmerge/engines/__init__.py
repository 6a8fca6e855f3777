"""Where the semantic stage decides its blocks: in this process, or across a Ray cluster.

Blocks (the records of one canonical endpoint pair) are independent, so they are the unit
of distribution; embeddings, the neighbour report and the id mapping stay in the driver.
How a block is decided is the kernel's (``relmerge.decide``). ``ray_engine`` is imported
only when asked for: Ray is an optional extra.
"""

from relmerge.engines.base import BlockEngine, LocalEngine

__all__ = ["BlockEngine", "LocalEngine"]
