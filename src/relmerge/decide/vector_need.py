"""Which relations of a block need the embedding model's full vectors.

With the shipped bands most verdicts never read a cosine: guards, the fuzzy ratio,
directions and endpoints decide them, and the one rule that reads it (a same-kind pair's
``auto_merge_cosine``) applies to a minority of pairs. A pair's verdict reads its cosine
exactly when it differs between a cosine of -1 and one of +1 (every band is a threshold
on it), so :func:`vector_need` asks :func:`~relmerge.decide.tiers.decide_pair` itself at
both ends: no second copy of the tiers' logic to drift from them.

The automatic merges are also taken in order of fuzzy ratio plus cosine; when a block
has a keep and two or more merges, that order can decide which joins happen, so all of
its relations need the full vectors too.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.features import RelationFeatures
from relmerge.decide.job import orientation
from relmerge.decide.scores import BlockFuzzy, Mode, PairScores
from relmerge.decide.tiers import decide_pair
from relmerge.model import ExtractedRelation


@dataclass(frozen=True)
class VectorNeed:
    """A block's need: ``rows`` whose vectors some verdict reads, the ``pairs`` whose
    verdicts read a cosine (with their mode), and whether the order of its automatic
    merges could depend on the cosines (``ordered``: then ``rows`` is every row)."""

    rows: frozenset[int]
    pairs: tuple[tuple[int, int, Mode], ...] = ()
    ordered: bool = False


def vector_need(
    relations: list[ExtractedRelation],
    features: list[RelationFeatures],
    fuzzy: BlockFuzzy,
    config: DeduplicateRelationsConfig,
    known: frozenset[tuple[int, int]] = frozenset(),
) -> VectorNeed:
    """Which rows (of ``relations``) need vectors a verdict of the block reads."""
    pairs: list[tuple[int, int, Mode]] = []
    merges = keeps = 0
    for a, b in combinations(range(len(relations)), 2):
        mode, ratio = fuzzy.mode(a, b), fuzzy.ratio(a, b)
        pair_features = (features[a], features[b])
        way = orientation(relations[a], relations[b])
        ends = [
            decide_pair(
                a,
                b,
                pair_features,
                way,
                PairScores(mode, ratio, cosine, 0.0),
                config,
                (a, b) in known,
            )
            for cosine in (-1.0, 1.0)
        ]
        if (ends[0].verdict, ends[0].tier) != (ends[1].verdict, ends[1].tier):
            pairs.append((a, b, mode))
            merges += any(end.verdict == "merge" for end in ends)
            keeps += any(end.verdict == "keep" for end in ends)
        elif ends[0].verdict == "merge":
            merges += 1
        elif ends[0].verdict == "keep":
            keeps += 1
    if keeps and merges >= 2:
        return VectorNeed(frozenset(range(len(relations))), tuple(pairs), ordered=True)
    return VectorNeed(frozenset(row for a, b, _ in pairs for row in (a, b)), tuple(pairs))
