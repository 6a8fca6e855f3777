"""Where a run's work runs: in this process, in worker processes, or across a Ray cluster.

Chunks of whole blocks (the records of one canonical endpoint pair) are independent, so
they are the unit of distribution: ``relmerge.stages.chunk.work_chunk`` runs a chunk's
exact stage, embedding and block decisions wherever the engine puts it; reading, the LLM
gateway, the cross-block report, the id mapping and the logs stay in the driver
(``relmerge.run``). A Ray worker that sees the run's output folder writes its chunk's
relation files there itself (``outputs``); the driver books them. ``base`` holds the
:class:`~relmerge.engines.base.ChunkEngine` protocol and what every engine shares;
``local``, ``processes`` and ``ray_engine`` are the engines (Ray is an optional extra,
imported only by ``ray_engine``); ``workers``, ``gateway`` and ``process_worker`` what a
worker runs with; ``figures`` turns the chunks'
CPU seconds into the result's ``engine`` object.
"""
