"""Each test gets LightRAG's process-wide shared storage fresh.

LightRAG keeps its storages' data in process-wide dictionaries keyed by namespace and
workspace, not by working folder: a second instance in the same process would see the
first one's documents. ``finalize_share_data`` empties them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def fresh_lightrag_state() -> Iterator[None]:
    try:
        from lightrag.kg.shared_storage import finalize_share_data
    except ImportError:  # lightrag not installed: its tests skip themselves
        yield
        return
    finalize_share_data()
    yield
    finalize_share_data()
