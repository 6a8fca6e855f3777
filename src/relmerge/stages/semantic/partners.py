"""Which relations the cross-block report may compare: decided before anything is embedded.

A relation alone in its block is never scored for a merge, so it needs a vector only if
the entity report (``neighbours``) could report a pair of it: the report compares
relations that share an endpoint in the same role (each such list capped at
``entity_report_limit`` in input order) and reports a pair only if the two *other*
endpoints' names look alike (token-set fuzzy ≥ 90 or name cosine ≥ 0.85, for some way
each entity is written). So a relation needs a vector only when such a partner exists.
This pass finds them from ids and names alone — names are short and repeat, so they cost
a fraction of the descriptions they spare in real graphs, where most entity pairs have a
single relation (GraphRAG output: 978 relations, 43 pairs with two).

The answer is a superset of what the report uses: every pair it could report has both
relations marked, and the names it compares are among those compared here, so its
findings are those of a run that embeds every relation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import numpy as np
import numpy.typing as npt
from rapidfuzz import fuzz, process

from relmerge.normalize import normalize_key_text
from relmerge.providers.embedding import Vectors
from relmerge.stages.semantic.neighbours import NAME_COSINE, NAME_FUZZY

Int64s = npt.NDArray[np.int64]
Embed = Callable[[Sequence[str]], Awaitable[Vectors]]

# Name vectors are kept as float16 (half the memory at a million entities); a cosine
# computed from them is within 0.002 of the float32 one, so the pass marks a little more.
_COSINE_MARGIN = 0.005
_PAIRS_PER_STEP = 2_000_000


def _firsts(keys: Int64s, positions: Int64s) -> tuple[Int64s, Int64s]:
    """Each distinct key and the smallest position it occurs at."""
    order = np.lexsort((positions, keys))
    sorted_keys = keys[order]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    return sorted_keys[starts], positions[order][starts]


def _within_groups(groups: Int64s) -> tuple[Int64s, Int64s]:
    """Index pairs (i < j) of equal, adjacent ``groups`` values (``groups`` sorted)."""
    n = len(groups)
    if n < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    ends = np.r_[starts[1:], n]
    end_of = np.repeat(ends, ends - starts)
    counts = end_of - np.arange(n) - 1
    left = np.repeat(np.arange(n, dtype=np.int64), counts)
    offsets = np.arange(len(left), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    return left, left + 1 + offsets


async def report_candidates(
    ends: Int64s,
    end_names: Int64s,
    name_texts: Sequence[str],
    singleton: npt.NDArray[np.bool_],
    limit: int,
    embed: Embed,
) -> npt.NDArray[np.bool_]:
    """Per relation (rows of ``ends``), whether it needs a vector.

    ``ends``: (n, 2) entity numbers (source, target), in input order; ``end_names``: the
    numbers of the names they are written with (texts in ``name_texts``); ``singleton``:
    relations alone in their block. A relation in a larger block is always marked (its
    block may shrink to one unit in the exact stage, and it is embedded anyway).
    ``embed`` gives name vectors (L2-normalised rows).
    """
    n = len(ends)
    needs = ~singleton
    if limit <= 0 or n < 2:
        return needs if limit > 0 else np.zeros(n, dtype=np.bool_)
    entities = int(ends.max()) + 1
    position = np.arange(n, dtype=np.int64)
    # One row per relation and role: anchor (entity, role), the other entity and its name.
    anchor = np.r_[ends[:, 0] * 2, ends[:, 1] * 2 + 1]
    other = np.r_[ends[:, 1], ends[:, 0]]
    rows_position = np.r_[position, position]
    rows_single = np.r_[singleton, singleton]
    pair_key = anchor * entities + other
    # The report keeps an anchor's first ``limit`` units; their other endpoints are among
    # the anchor's first ``limit`` other entities by first appearance.
    keys, first = _firsts(pair_key, rows_position)
    key_anchor = keys // entities
    order = np.lexsort((first, key_anchor))
    ranked_anchor = key_anchor[order]
    starts = np.flatnonzero(np.r_[True, ranked_anchor[1:] != ranked_anchor[:-1]])
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    kept = np.sort(keys[order][rank < limit])
    kept_single = np.zeros(len(kept), dtype=np.bool_)
    where = np.searchsorted(kept, pair_key)
    found = (where < len(kept)) & (kept[np.minimum(where, len(kept) - 1)] == pair_key)
    np.logical_or.at(kept_single, where[found], rows_single[found])
    # Nodes: each kept (anchor, other entity) with each way the other entity is written
    # anywhere in the batch (the report may name an entity from any of its relations).
    variants = np.unique(np.stack([ends.ravel(), end_names.ravel()], axis=1), axis=0)
    var_start = np.searchsorted(variants[:, 0], np.arange(entities))
    var_count = np.diff(np.r_[var_start, len(variants)])
    kept_other = kept % entities
    per_pair = var_count[kept_other]
    pair_of_node = np.repeat(np.arange(len(kept)), per_pair)
    offset = np.arange(len(pair_of_node)) - np.repeat(np.cumsum(per_pair) - per_pair, per_pair)
    node_name = variants[var_start[kept_other[pair_of_node]] + offset, 1]
    nodes = np.stack([kept[pair_of_node] // entities, kept_other[pair_of_node], node_name], axis=1)
    node_single = kept_single[pair_of_node]
    flagged = np.zeros(len(nodes), dtype=np.bool_)
    left, right = _within_groups(nodes[:, 0])
    useful = (nodes[left, 1] != nodes[right, 1]) & (node_single[left] | node_single[right])
    left, right = left[useful], right[useful]
    if len(left):
        alike = await _alike(nodes[left, 2], nodes[right, 2], name_texts, embed)
        flagged[left[alike]] = True
        flagged[right[alike]] = True
    marked = nodes[flagged]
    marked_keys = np.unique(marked[:, 0] * entities + marked[:, 1])
    hit = np.isin(pair_key, marked_keys)
    needs |= hit[:n] | hit[n:]
    return needs


async def _alike(
    left: Int64s, right: Int64s, name_texts: Sequence[str], embed: Embed
) -> npt.NDArray[np.bool_]:
    """Whether each pair of names (numbers into ``name_texts``) looks alike."""
    low, high = np.minimum(left, right), np.maximum(left, right)
    pairs, inverse = np.unique(np.stack([low, high], axis=1), axis=0, return_inverse=True)
    same = pairs[:, 0] == pairs[:, 1]
    used = np.unique(pairs)
    normal = {int(i): normalize_key_text(name_texts[i]) for i in used.tolist()}
    alike = same.copy()
    for start in range(0, len(pairs), _PAIRS_PER_STEP):
        step = pairs[start : start + _PAIRS_PER_STEP]
        scores = process.cpdist(
            [normal[i] for i in step[:, 0].tolist()],
            [normal[i] for i in step[:, 1].tolist()],
            scorer=fuzz.token_set_ratio,
            score_cutoff=NAME_FUZZY,
        )
        alike[start : start + len(step)] |= scores >= NAME_FUZZY
    open_pairs = pairs[~alike]
    if len(open_pairs):
        needed = np.unique(open_pairs)
        rows = {int(name): row for row, name in enumerate(needed.tolist())}
        vectors = np.zeros((len(needed), 0), dtype=np.float16)
        parts = []
        for start in range(0, len(needed), 8192):
            texts = [name_texts[i] for i in needed[start : start + 8192].tolist()]
            parts.append(np.asarray(await embed(texts), dtype=np.float16))
        vectors = np.concatenate(parts)
        at_left = np.fromiter((rows[i] for i in open_pairs[:, 0].tolist()), np.int64)
        at_right = np.fromiter((rows[i] for i in open_pairs[:, 1].tolist()), np.int64)
        cosine = np.empty(len(open_pairs), dtype=np.float32)
        for start in range(0, len(open_pairs), 65536):
            a = vectors[at_left[start : start + 65536]].astype(np.float32)
            b = vectors[at_right[start : start + 65536]].astype(np.float32)
            cosine[start : start + len(a)] = np.einsum("ij,ij->i", a, b)
        alike[np.flatnonzero(~alike)] = cosine >= NAME_COSINE - _COSINE_MARGIN
    result: npt.NDArray[np.bool_] = alike[inverse.ravel()]
    return result
