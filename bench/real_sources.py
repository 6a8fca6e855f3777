"""The real graphs relmerge is checked on, read the same way by every bench script.

Five sources, each a list of relation records: the three converted sets of
``../shared/data/real`` (GraphRAG and nano-graphrag output) and the two LightRAG working
folders of ``../shared/data/upstream/lightrag`` (imported as ``relmerge import`` does: the
edge ``keywords`` LightRAG writes become the records' relation name, shared by every
extraction of one edge). A *block* is the records of one unordered entity pair; only
blocks of two or more records hold pairs to decide.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from relmerge.integrations.lightrag.folder import import_lightrag

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
REAL = ("graphrag-christmas-carol", "nanographrag-christmas-carol", "nanographrag-anesthesia-zh")
LIGHTRAG = ("home-lab-agentic-ai", "lightrag-hku-1.5.7-pipeline")
SOURCES = REAL + LIGHTRAG


def load_source(name: str, shared: Path = SHARED) -> list[dict[str, Any]]:
    """The records of one source, in file order."""
    if name in REAL:
        path = shared / "real" / name / "relations.jsonl"
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    folder = shared / "upstream" / "lightrag" / name
    return [dict(record) for record in import_lightrag(folder).relations]


def blocks(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Multi-record blocks (unordered endpoint pairs), in order of first record."""
    grouped: dict[frozenset[str], list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        grouped[frozenset((record["source_entity_id"], record["target_entity_id"]))].append(record)
    return [members for members in grouped.values() if len(members) > 1]
