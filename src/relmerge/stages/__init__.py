"""Pipeline stages: pure functions and small classes over typed data (no file I/O).

``remap``, ``identical``, ``exact`` and ``llm_merge`` (the exact stage), ``semantic/``
(the semantic stage, a thin driver over the kernel ``relmerge.decide``), and ``chunk``:
the order of the stages in one chunk of whole blocks, as any engine works it.
"""
