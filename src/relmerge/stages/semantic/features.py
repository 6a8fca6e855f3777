"""Per-relation features computed once and compared pairwise by the guards and tiers."""

from __future__ import annotations

from dataclasses import dataclass

from relmerge.model import ExtractedRelation
from relmerge.normalize import normalize_key_text
from relmerge.stages.semantic.lexicon import Lexicon, TermSet
from relmerge.stages.semantic.numbers import extract_numbers


@dataclass(frozen=True)
class RelationFeatures:
    name: str
    text: str  # normalised "name description attribute values": the fuzzy-score text
    numbers: frozenset[float]
    roles: frozenset[str]
    negated: bool
    passive: bool
    opposite_sides: frozenset[tuple[int, int]]  # (pair index, side) found in the text
    inverse_sides: frozenset[tuple[int, int]]  # (pair index, side) found in the name
    symmetric: bool
    generic_name: bool = False  # "related", "关联": the name says nothing about the fact


_LEAD_CHARS = 200


def _sides(pairs: list[tuple[TermSet, TermSet]], text: str) -> frozenset[tuple[int, int]]:
    """Which side of each word pair ``text`` holds (pairs found on both sides are skipped)."""
    found = set()
    for index, (left, right) in enumerate(pairs):
        has_left, has_right = left.any_in(text), right.any_in(text)
        if has_left != has_right:
            found.add((index, 0 if has_left else 1))
    return frozenset(found)


FUZZY_TEXT_CHARS = 2000


@dataclass(frozen=True)
class _NameFeatures:
    roles: frozenset[str]
    passive: bool
    inverse_sides: frozenset[tuple[int, int]]
    symmetric: bool
    generic_name: bool


_NAME_CACHE_SIZE = 100_000


def _name_features(name: str, lexicon: Lexicon) -> _NameFeatures:
    """The features of a (normalised) name alone, computed once per distinct name."""
    known: _NameFeatures | None = lexicon.name_cache.get(name)
    if known is None:
        known = _NameFeatures(
            roles=frozenset(role for role, terms in lexicon.roles.items() if terms.any_in(name)),
            passive=any(pattern.search(name) for pattern in lexicon.passive),
            inverse_sides=_sides(lexicon.inverse, name),
            symmetric=lexicon.symmetric.any_in(name),
            generic_name=name in lexicon.generic,
        )
        if len(lexicon.name_cache) >= _NAME_CACHE_SIZE:
            lexicon.name_cache.clear()
        lexicon.name_cache[name] = known
    return known


def relation_features(relation: ExtractedRelation, lexicon: Lexicon) -> RelationFeatures:
    name = normalize_key_text(relation.name)
    description = normalize_key_text(relation.description)
    attributes = " ".join(normalize_key_text(v) for v in relation.attributes.values())
    # A relation given as plain text has its text as both name and description: once.
    body = name if description == name else f"{name} {description}"
    full_text = f"{body} {attributes}".strip()
    by_name = _name_features(name, lexicon)
    roles = by_name.roles or frozenset(
        role for role, terms in lexicon.roles.items() if terms.any_in(description)
    )
    return RelationFeatures(
        name=name,
        # The fuzzy ratio is quadratic in length: a megabyte description would take minutes
        # per pair. Its opening is what states the relation; numbers come from all of it.
        text=full_text[:FUZZY_TEXT_CHARS],
        numbers=extract_numbers(full_text, lexicon),
        roles=roles,
        # Only the opening of a description states the relation; later sentences of long
        # ones add background whose negations say nothing about it.
        negated=lexicon.negation.any_in(f"{name} {description[:_LEAD_CHARS]}"),
        passive=by_name.passive,
        opposite_sides=_sides(lexicon.opposites, f"{name} {description}"),
        inverse_sides=by_name.inverse_sides,
        symmetric=by_name.symmetric,
        generic_name=by_name.generic_name,
    )
