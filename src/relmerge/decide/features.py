"""Per-relation features computed once and compared pairwise by the guards and tiers."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Literal

from relmerge.decide.lexicon import Lexicon, TermSet
from relmerge.decide.numbers import extract_numbers, without_numbers
from relmerge.model import ExtractedRelation
from relmerge.normalize import normalize_key_text

Symmetry = Literal["symmetric", "directed", "unknown"]
Kind = Literal["event", "state", "unknown"]


@dataclass(frozen=True)
class RelationFeatures:
    name: str  # normalised
    text: str  # normalised "name description attribute values": the full-mode fuzzy text
    description_text: str  # normalised "description attribute values": description mode
    numbers: frozenset[float]
    roles: frozenset[str]
    predicates: frozenset[str]  # known kinds of relation the name says (capital of, sued …)
    negated: bool
    passive: bool  # passive voice or a receiving marker: the direction flips (R2)
    opposite_sides: frozenset[tuple[int, int]]  # (pair index, side) found in the text
    inverse_sides: frozenset[tuple[int, int]]  # (pair index, side) found in the name
    symmetry: Symmetry = "unknown"
    kind: Kind = "unknown"
    generic_name: bool = False  # empty or "related"-like: the name says nothing at all
    shared_name: bool = False  # carried by a large part of the batch: no evidence of one fact
    # The known kinds of relation and roles the name states, when every word of it is
    # explained by the vocabulary; empty when a word is not (a verb of change, a marker,
    # a qualifier): then the name is no evidence of a kind.
    kinds: frozenset[str] = frozenset()
    # Directions of the verbs of change the name says ("up", "down", "other").
    change: frozenset[str] = frozenset()

    @property
    def symmetric(self) -> bool:
        return self.symmetry == "symmetric"


_LEAD_CHARS = 200
SHARED_NAME_FLOOR = 100  # in a smaller batch the share counts as of this many relations


def batch_shared_names(counts: Mapping[str, int], total: int, share: float) -> frozenset[str]:
    """Names a batch gives nearly every relation ("related"): carried by more than
    ``share`` of its ``total`` relations, and by more than ``share`` × 100 (in a small
    batch a name that repeats is just a name). Such a name tells no two facts apart."""
    floor = share * max(total, SHARED_NAME_FLOOR)
    return frozenset(name for name, count in counts.items() if count > floor)


FUZZY_TEXT_CHARS = 2000


def _change(text: str, lexicon: Lexicon) -> frozenset[str]:
    """Directions of the verbs of change in ``text`` (increase, 减持, a cédé …)."""
    return frozenset(way for way, pattern in lexicon.change.items() if pattern.search(text))


def _kind(text: str, lexicon: Lexicon, change: frozenset[str]) -> Kind:
    # A change of a state is an event ("raised its stake in" is no "stake in").
    if change:
        return "event"
    event, state = lexicon.events.any_in(text), lexicon.states.any_in(text)
    if event == state:
        return "unknown"
    return "event" if event else "state"


_LETTER = re.compile(r"[^\W\d_]")


def explained(name: str, words: TermSet, passive: bool, lexicon: Lexicon) -> bool:
    """Whether every word (en/fr) or character run (zh) of ``name`` is accounted for by
    ``words`` (leftmost-longest: the kinds' own words, function words, modifiers),
    numbers, and — where a passive pattern recognised the voice — its markers."""
    rest = words.removed_from(name)
    if passive:
        rest = lexicon.markers.removed_from(rest)
    return _LETTER.search(without_numbers(rest)) is None


@dataclass(frozen=True)
class _NameFeatures:
    roles: frozenset[str]
    predicates: frozenset[str]
    passive: bool
    inverse_sides: frozenset[tuple[int, int]]
    symmetry: Symmetry
    kind: Kind
    generic_name: bool
    kinds: frozenset[str]
    change: frozenset[str]


_NAME_CACHE_SIZE = 100_000


def _symmetry(name: str, roles: frozenset[str], passive: bool, lexicon: Lexicon) -> Symmetry:
    """Symmetric only by a symmetric word, nothing directed outside it ("co-founder
    with" is symmetric, "ally and commander of" is not) and no word left unexplained
    ("ally in the quest" is the LLM's call); directed by a directed word, a role, a
    passive or receiving form; anything else is unknown — for the LLM to judge."""
    if not name or name in lexicon.generic:
        # A generic name's direction is unknown, unless the user declared it symmetric
        # (``symmetric_relations = ["related"]`` for a graph whose edges are undirected).
        return "symmetric" if name in lexicon.symmetric.terms else "unknown"
    rest = lexicon.symmetric.removed_from(name)
    has_symmetric = rest != name
    directed = (
        passive
        or lexicon.directed.any_in(rest)
        or bool(lexicon.roles.found_in(rest))
        or bool(lexicon.inverse.sides(rest))
    )
    if directed:
        return "unknown" if has_symmetric else "directed"
    if has_symmetric and explained(name, lexicon.symmetric_words, passive, lexicon):
        return "symmetric"
    return "unknown"


def _passive(text: str, lexicon: Lexicon) -> bool:
    return lexicon.receiving.any_in(text) or any(p.search(text) for p in lexicon.passive)


def _name_features(name: str, lexicon: Lexicon) -> _NameFeatures:
    """The features of a (normalised) name alone, computed once per distinct name."""
    known: _NameFeatures | None = lexicon.name_cache.get(name)
    if known is None:
        roles = lexicon.roles.found_in(name)
        predicates = lexicon.predicates.found_in(name)
        passive = _passive(name, lexicon)
        change = _change(name, lexicon)
        kinds = predicates | {f"role:{role}" for role in roles}
        known = _NameFeatures(
            roles=roles,
            predicates=predicates,
            passive=passive,
            inverse_sides=lexicon.inverse.sides(name),
            symmetry=_symmetry(name, roles, passive, lexicon),
            kind=_kind(name, lexicon, change),
            generic_name=not name or name in lexicon.generic,
            kinds=kinds if explained(name, lexicon.kind_words, passive, lexicon) else frozenset(),
            change=change,
        )
        if len(lexicon.name_cache) >= _NAME_CACHE_SIZE:
            lexicon.name_cache.clear()
        lexicon.name_cache[name] = known
    return known


def relation_features(
    relation: ExtractedRelation, lexicon: Lexicon, shared_names: Collection[str] = ()
) -> RelationFeatures:
    """``shared_names``: normalised names so common in the batch that they prove nothing
    about two records stating one fact (GraphRAG and nano-graphrag call nearly every
    relation "related"); what such a name says about direction still holds."""
    name = normalize_key_text(relation.name)
    description = normalize_key_text(relation.description)
    attributes = " ".join(normalize_key_text(v) for v in relation.attributes.values())
    # A relation given as plain text has its text as both name and description: once.
    body = name if description == name else f"{name} {description}"
    full_text = f"{body} {attributes}".strip()
    by_name = _name_features(name, lexicon)
    generic = by_name.generic_name
    lead = description[:_LEAD_CHARS]
    roles = by_name.roles or lexicon.roles.found_in(description)
    # A name that says nothing leaves the description to say what kind of fact it is.
    # Verbs of change are read in names only: a description's "lowers blood pressure" or
    # "raising his salary" tells what happened, not that the relation is a change.
    kind = (
        by_name.kind
        if by_name.kind != "unknown" or not generic
        else _kind(lead, lexicon, frozenset())
    )
    passive = by_name.passive or (generic and _passive(lead, lexicon))
    return RelationFeatures(
        name=name,
        # The fuzzy ratio is quadratic in length: a megabyte description would take minutes
        # per pair. Its opening is what states the relation; numbers come from all of it.
        text=full_text[:FUZZY_TEXT_CHARS],
        description_text=f"{description} {attributes}".strip()[:FUZZY_TEXT_CHARS],
        numbers=extract_numbers(full_text, lexicon),
        roles=roles,
        predicates=frozenset() if generic else by_name.predicates,
        # Only the opening of a description states the relation; later sentences of long
        # ones add background whose negations say nothing about it.
        negated=lexicon.negation.any_in(f"{name} {lead}"),
        passive=passive,
        opposite_sides=lexicon.opposites.sides(f"{name} {description}"),
        inverse_sides=by_name.inverse_sides,
        symmetry=by_name.symmetry,
        kind=kind,
        generic_name=generic,
        shared_name=generic or name in shared_names,
        kinds=frozenset() if generic else by_name.kinds,
        change=by_name.change,
    )
