"""relmerge for LightRAG: deduplicate the edges of a LightRAG instance through its own API.

>>> from relmerge.integrations.lightrag import deduplicate, undo  # doctest: +SKIP
>>> track_id = await rag.ainsert(texts)                              # doctest: +SKIP
>>> await deduplicate(rag, track_id=track_id, output="dedup-out")     # doctest: +SKIP

Everything about LightRAG lives here: the pass through the storage API (``passes``,
``graph``, ``edits``, ``journal``), the records made of its edges (``records``), the
offline folder import and export (``folder``, ``folder_stores``) and the instance the
command line opens (``instance``; the commands themselves are ``relmerge.cli.lightrag``,
the CLI's package). The pass needs
``lightrag-hku`` (``pip install relmerge[lightrag]``); the folder import and export do not.
"""

from relmerge.integrations.lightrag.passes import LightragPass, UndoResult, deduplicate, undo
from relmerge.integrations.lightrag.tokenizer import offline_tokenizer

__all__ = ["LightragPass", "UndoResult", "deduplicate", "offline_tokenizer", "undo"]
