"""What an oracle knows about near-miss canaries: which shown records state one of them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relmerge.decide.near_miss import FAMILIES, endpoints


def states_near_miss(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` is a near-miss sentence about its own entities (a fact no real
    record of a test states): a script that answers right keeps it apart."""
    a, b = endpoints(record)
    text = str(record.get("description") or "")
    return any(
        sentence.format(a=a, b=b) == text
        for families in FAMILIES.values()
        for family in families
        for _, sentence in family
    )
