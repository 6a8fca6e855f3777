"""Guards: reasons why two similar-looking relations may state different facts.

A guard never forces a merge; it only forbids an automatic one. The pair then goes to the
LLM, or, with no LLM, stays apart and is listed for review. Each guard has a name recorded
in the decision log.
"""

from __future__ import annotations

import re

from rapidfuzz.distance import Indel

from relmerge.decide.features import RelationFeatures
from relmerge.decide.numbers import numbers_conflict


def _opposed(left: frozenset[tuple[int, int]], right: frozenset[tuple[int, int]]) -> bool:
    return any((index, 1 - side) in right for index, side in left)


def _opposite_change(left: frozenset[str], right: frozenset[str]) -> bool:
    """A change up (increase, buy) against a change down (reduce, sell)."""
    ways = {"up", "down"}
    return left != right and bool(left & ways) and bool(right & ways) and left | right >= ways


def fired_guards(a: RelationFeatures, b: RelationFeatures) -> list[str]:
    """Names of the guards that fire for the pair (empty: nothing forbids a merge)."""
    fired = []
    if numbers_conflict(a.numbers, b.numbers):
        fired.append("numbers")
    # A role or a kind of relation that only one name states, or that the names do not
    # share, leaves the LLM to say whether the two name one fact (R5; "sponsor of" /
    # "sued", "part of" / "capital of").
    if (a.roles or b.roles) and not (a.roles & b.roles):
        fired.append("role")
    if (a.predicates or b.predicates) and not (a.predicates & b.predicates):
        fired.append("predicate")
    if a.negated != b.negated:
        fired.append("negation")
    if _opposed(a.opposite_sides, b.opposite_sides) or _opposite_change(a.change, b.change):
        fired.append("opposite")
    if a.passive != b.passive or _opposed(a.inverse_sides, b.inverse_sides):
        fired.append("direction")
    # An event is the same fact only as the same event (R6): against a state, or a name
    # that says no event, it is the LLM's call.
    if a.kind != b.kind and "event" in (a.kind, b.kind):
        fired.append("event_state")
    return fired


_TOKEN = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]|\w+")


def substituted(a: str, b: str) -> bool:
    """Whether one text puts other words where the other has its own ("…to avoid
    hypoglycaemia" / "…to avoid lactic acidosis"; "高" / "低"), not only adds or leaves
    out words. Near-identical wording with a substitution is not the same text in
    substance: a fuzzy ratio of 90 hides it in short texts. Words are Latin-script words
    and single CJK characters; punctuation is ignored."""
    previous = None
    for op in Indel.opcodes(_TOKEN.findall(a), _TOKEN.findall(b)):
        if op.tag == "equal":
            previous = None
        elif previous is not None and op.tag != previous:
            return True
        else:
            previous = op.tag
    return False
