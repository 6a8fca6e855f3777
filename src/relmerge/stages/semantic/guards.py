"""Guards: reasons why two similar-looking relations may state different facts.

A guard never forces a merge; it only forbids an automatic one. The pair then goes to the
LLM, or, with no LLM, stays apart. Each guard has a name recorded in the decision log.
"""

from __future__ import annotations

from relmerge.stages.semantic.features import RelationFeatures
from relmerge.stages.semantic.numbers import numbers_conflict


def _opposed(left: frozenset[tuple[int, int]], right: frozenset[tuple[int, int]]) -> bool:
    return any((index, 1 - side) in right for index, side in left)


def fired_guards(a: RelationFeatures, b: RelationFeatures) -> list[str]:
    """Names of the guards that fire for the pair (empty: nothing forbids a merge)."""
    fired = []
    if numbers_conflict(a.numbers, b.numbers):
        fired.append("numbers")
    if a.roles and b.roles and not (a.roles & b.roles):
        fired.append("role")
    if a.negated != b.negated:
        fired.append("negation")
    if _opposed(a.opposite_sides, b.opposite_sides):
        fired.append("opposite")
    if a.passive != b.passive or _opposed(a.inverse_sides, b.inverse_sides):
        fired.append("direction")
    return fired
