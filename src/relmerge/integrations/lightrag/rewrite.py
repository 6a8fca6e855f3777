"""The descriptions a run leaves on each LightRAG edge: its distinct facts, ``<SEP>``-joined.

A fact the run merged from several fragments becomes one fragment, the run's merged text
(which keeps every member's wording: ``decide.merged``); a fragment the run kept alone
stays as it was, byte for byte. Source ids, keywords and weight are the edge's own: every
record of an edge cites all its chunks, so merging fragments within an edge changes none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from relmerge.adapters.common import Imported, Piece, RunResult, layout
from relmerge.errors import RelmergeError
from relmerge.integrations.lightrag.records import SEP


def fragment(piece: Piece, raws: Mapping[str, str]) -> str:
    """A piece's text in the edge description: as it was, or the merged description
    (quoted like its first member was, and never holding the separator)."""
    if piece.unchanged or piece.output is None:
        return raws[piece.relation_id]
    text = piece.output.description.replace(SEP, " ")
    first = raws[piece.members[0]].strip()
    return f'"{text}"' if len(first) >= 2 and first[0] == first[-1] == '"' else text


def edge_fragments(
    imported: Imported, raws: Mapping[str, str], run: RunResult
) -> dict[int, list[tuple[str, tuple[str, ...]]]]:
    """Edge index -> its fragments after the run: (text, the record ids it holds). One
    pair is one edge, so no output may take members from two edges."""
    own: dict[int, set[str]] = {}
    for rid, number in imported.origins.items():
        own.setdefault(number, set()).add(rid)
    found: dict[int, list[tuple[str, tuple[str, ...]]]] = {}
    for number, pieces in sorted(layout(imported, run).items()):
        held = [piece.members or (piece.relation_id,) for piece in pieces]
        if {m for members in held for m in members} - own[number]:
            raise RelmergeError(
                "a merged relation takes fragments from two LightRAG edges; a pass through "
                "LightRAG's API merges within an edge only (no entity mapping)"
            )
        found[number] = [
            (fragment(piece, raws), members) for piece, members in zip(pieces, held, strict=True)
        ]
    return found


def new_descriptions(
    imported: Imported,
    raws: Mapping[str, str],
    fragments: Mapping[int, Sequence[tuple[str, tuple[str, ...]]]],
) -> dict[int, tuple[str, int]]:
    """Edge index -> (its new description, its number of fragments), for each edge the run
    changed (``fragments``: :func:`edge_fragments`)."""
    own: dict[int, list[str]] = {}
    for rid, number in imported.origins.items():
        own.setdefault(number, []).append(rid)
    changed: dict[int, tuple[str, int]] = {}
    for number, parts in fragments.items():
        if [text for text, _ in parts] == [raws[rid] for rid in own[number]]:
            continue  # every fragment as it was: the edge as it was
        changed[number] = (SEP.join(text for text, _ in parts), len(parts))
    return changed
