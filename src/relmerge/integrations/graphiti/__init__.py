"""relmerge for Graphiti: merge the duplicate edges of a Graphiti graph through graphiti-core.

>>> from relmerge.integrations.graphiti import deduplicate, undo  # doctest: +SKIP
>>> await deduplicate(driver, group_id="g1", output="out", embedder=emb)  # doctest: +SKIP
>>> await undo(driver, "out")  # doctest: +SKIP

The pass (``passes``) reads a group's RELATES_TO edges with graphiti-core's own classes
(``graph``), so every backend graphiti-core drives is reached by the same code (tested on
FalkorDB and Kuzu); records are made in ``records``; every write is journalled
(``journal``). graphiti-core (``pip install relmerge[graphiti]``) is imported only when a
pass runs, so importing this package is cheap.
"""

from relmerge.integrations.graphiti.passes import GraphitiPass, UndoResult, deduplicate, undo

__all__ = ["GraphitiPass", "UndoResult", "deduplicate", "undo"]
