"""Relation stores: a growing graph kept between runs, for store merge (DESIGN §8).

Not the object stores of :mod:`relmerge.stores` (bytes by key): a relation store keeps
relations by id and by endpoint pair, the batches that changed them, and a change log to
undo a batch. Open one by URL::

    async with open_graph_store("sqlite:///graph.db") as store:
        await store.init()
        state = await store.relations_for_pairs([("e1", "e2")])

See ``docs/guides/graph-store.md`` for the read -> decide -> apply loop of a merge.
"""

from __future__ import annotations

from relmerge.graphstore.base import (
    ApplyResult,
    Batch,
    BatchCounts,
    BatchRecord,
    Changes,
    Pair,
    PairState,
    RelationStore,
    StoreInfo,
    UndoResult,
    pair_of,
    relation_pair,
)
from relmerge.graphstore.schema import SCHEMA_VERSION
from relmerge.graphstore.url import SCHEMES, open_graph_store, redact_store_url

__all__ = [
    "SCHEMA_VERSION",
    "SCHEMES",
    "ApplyResult",
    "Batch",
    "BatchCounts",
    "BatchRecord",
    "Changes",
    "Pair",
    "PairState",
    "RelationStore",
    "StoreInfo",
    "UndoResult",
    "open_graph_store",
    "pair_of",
    "redact_store_url",
    "relation_pair",
]
