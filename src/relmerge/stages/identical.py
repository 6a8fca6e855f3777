"""The no-LLM path of the exact stage: members whose descriptions are identical.

An exact key is not proof of the same fact (one "CEO of" in two periods, a bounty of 500
and one of 5,000 under one key), so only records whose descriptions are identical after
normalisation, and whose attributes do not contradict each other, merge without an LLM.
"""

from __future__ import annotations

from collections.abc import Sequence

from relmerge.decide.merged import rule_fields
from relmerge.normalize import normalize_description, normalize_key_text
from relmerge.units import Originals, Unit, merge_units


def attributes_compatible(left: dict[str, str], right: dict[str, str]) -> bool:
    """No key with two different values (``since: 2019`` vs ``since: 2020``)."""
    return all(
        normalize_key_text(left[key]) == normalize_key_text(right[key])
        for key in left.keys() & right.keys()
    )


def holds_pinned(unit: Unit, pinned: frozenset[int]) -> bool:
    """Whether ``unit`` stands for a stored relation (one of its members is pinned)."""
    return bool(pinned) and any(index in pinned for index in unit.members)


def _any_pinned(units: Sequence[Unit], pinned: frozenset[int]) -> bool:
    return any(holds_pinned(unit, pinned) for unit in units)


def merge_identical(
    units: Sequence[Unit], originals: Originals, pinned: frozenset[int] = frozenset()
) -> tuple[list[Unit], list[list[Unit]]]:
    """Merge units of one exact-key group whose descriptions are identical.

    A bucket holds at most one unit with a ``pinned`` member (a stored relation: stored
    relations were decided when they arrived and are never merged with each other).
    Returns the group's units afterwards (in order of first member) and the buckets that
    merged, for the decision log.
    """
    buckets: list[list[Unit]] = []
    keys: list[str] = []
    for unit in units:
        description = normalize_description(unit.relation.description)
        for bucket, key in zip(buckets, keys, strict=True):
            if (
                key == description
                and not (holds_pinned(unit, pinned) and _any_pinned(bucket, pinned))
                and all(
                    attributes_compatible(unit.relation.attributes, other.relation.attributes)
                    for other in bucket
                )
            ):
                bucket.append(unit)
                break
        else:
            buckets.append([unit])
            keys.append(description)
    result = []
    merged = []
    for bucket in buckets:
        if len(bucket) == 1:
            result.append(bucket[0])
            continue
        members = [originals[i] for i in sorted(i for unit in bucket for i in unit.members)]
        fields = rule_fields(members, bucket[0].relation)
        result.append(merge_units(bucket, originals, fields))
        merged.append(bucket)
    result.sort(key=lambda unit: unit.first)
    return result, merged
