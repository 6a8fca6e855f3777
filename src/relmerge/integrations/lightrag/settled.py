"""The fragments earlier passes decided, so that the next pass asks only about new ones.

After a pass, every fragment of the edges it read is settled — unless a question about it
is open (it is in the pass's clarifications: a person's answer, or the model once it is
back, may still merge it). Kept in ``OUT/lightrag/settled.json`` by entity pair and the
md5 of the fragment's text. The next pass pins the settled fragments (``run_pipeline``'s
``pinned``, as a store merge pins stored relations): two of them are never judged against
each other, a new fragment is judged against them. So a pass after each insert costs what
the insert added, not what the edges already held.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import orjson

from relmerge.adapters.common import md5_hex, write_atomic
from relmerge.integrations.lightrag.graph import GraphEdge

FILE = "settled.json"
Key = tuple[str, str, str]  # source, target, md5 of the fragment's text


def key(edge: GraphEdge, text: str) -> Key:
    return edge.source, edge.target, md5_hex(text)


def read(base: Path) -> set[Key]:
    try:
        items = orjson.loads((base / FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return set()
    return {(str(a), str(b), str(c)) for a, b, c in items} if isinstance(items, list) else set()


def questioned(clarifications: Path) -> set[str]:
    """Ids of the records that the pass's questions show (open questions)."""
    if not clarifications.is_file():
        return set()
    ids: set[str] = set()
    for line in clarifications.read_bytes().splitlines():
        try:
            question = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        for record in question.get("records") or [] if isinstance(question, dict) else []:
            if isinstance(record, dict) and isinstance(record.get("relation_id"), str):
                ids.add(record["relation_id"])
                ids.update(str(m) for m in record.get("merged_from") or [])
    return ids


def write(
    base: Path,
    known: Iterable[Key],
    edges: Sequence[GraphEdge],
    fragments: Mapping[int, Sequence[tuple[str, tuple[str, ...]]]],
    asked: set[str],
) -> None:
    """The settled set after a pass: the read edges' fragments as they are now (those no
    open question holds), the other edges' as they were."""
    read_pairs = {(edge.source, edge.target) for edge in edges}
    kept = {k for k in known if (k[0], k[1]) not in read_pairs}
    for number, parts in fragments.items():
        for text, members in parts:
            if not asked.intersection(members):
                kept.add(key(edges[number], text))
    write_atomic(base / FILE, orjson.dumps(sorted(kept)))
