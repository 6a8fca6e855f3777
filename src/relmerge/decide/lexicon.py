"""The guard, direction and symmetry vocabulary, loaded from ``relmerge/data/lexicon/*.toml``.

Every language file is merged into one :class:`Lexicon`; terms are compiled once into
matchers that respect word boundaries for Latin script and match CJK as substrings. The
files hold general words of each language (see their README), never words of one data set.
:func:`build_lexicon` builds one from parsed files, so that a bench can hold entries out.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any

from relmerge.config import DeduplicateRelationsConfig
from relmerge.normalize import normalize_key_text

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def _term_pattern(term: str) -> str:
    term = normalize_key_text(term)
    escaped = re.escape(term)
    if _CJK.search(term):
        return escaped
    # Word boundaries only where the term itself starts or ends with a letter: "n'" and
    # "n't" must match inside "n'est" and "isn't".
    before = r"(?<!\w)" if term[0].isalnum() else ""
    after = r"(?!\w)" if term[-1].isalnum() else ""
    return before + escaped + after


def entry_pattern(key: str, entry: str) -> re.Pattern[str]:
    """How an entry of ``key`` (as :func:`vocabulary_entries` names it) is matched in
    normalised text: a pattern key's entry is itself a regular expression."""
    if key.split(".")[0] in PATTERN_KEYS:
        return re.compile(entry)
    return re.compile(_term_pattern(entry))


class TermSet:
    """A set of terms matched in one regex pass; ``found`` returns which terms occur."""

    def __init__(self, terms: list[str]) -> None:
        self.terms = sorted({normalize_key_text(t) for t in terms if t.strip()}, key=len)[::-1]
        self._patterns = [(t, re.compile(_term_pattern(t))) for t in self.terms]
        joined = "|".join(f"(?:{_term_pattern(t)})" for t in self.terms)
        self._any = re.compile(joined) if joined else None

    def any_in(self, text: str) -> bool:
        # A term can only match where its literal text occurs: the substring test is
        # exact as a filter and far cheaper than the regex, which most texts never need.
        if self._any is None or not any(term in text for term in self.terms):
            return False
        return bool(self._any.search(text))

    def found(self, text: str) -> set[str]:
        if not self.any_in(text):
            return set()
        return {term for term, pattern in self._patterns if pattern.search(text)}

    def removed_from(self, text: str) -> str:
        """``text`` with every occurrence of the terms blanked out (longest terms first)."""
        if not self.any_in(text):
            return text
        assert self._any is not None
        return self._any.sub(" ", text)


class TermPairs:
    """Pairs of terms (ally / enemy, acquired / acquired by) and which side of each a
    text holds. One substring pass over every term of every pair finds the few pairs
    worth a regex: most texts hold none (a pair at a time cost most of the features)."""

    def __init__(self, raw: list[list[str]]) -> None:
        self.pairs = [(TermSet([left]), TermSet([right])) for left, right in raw]
        self._owners: dict[str, list[tuple[int, int]]] = {}
        for index, pair in enumerate(self.pairs):
            for side, terms in enumerate(pair):
                for term in terms.terms:
                    self._owners.setdefault(term, []).append((index, side))

    def __len__(self) -> int:
        return len(self.pairs)

    def sides(self, text: str) -> frozenset[tuple[int, int]]:
        """(pair index, side) for each pair of which ``text`` holds one side only."""
        candidates = {
            owner for term, owners in self._owners.items() if term in text for owner in owners
        }
        held = {(index, side) for index, side in candidates if self.pairs[index][side].any_in(text)}
        return frozenset((index, side) for index, side in held if (index, 1 - side) not in held)


class TermGroups(dict[str, TermSet]):
    """Named sets of terms (roles: CEO → its spellings), and which of them a text holds,
    with one substring pass over all their terms first (most texts hold none)."""

    def __init__(self, groups: dict[str, list[str]]) -> None:
        super().__init__({name: TermSet(terms) for name, terms in groups.items()})
        self._owners: dict[str, list[str]] = {}
        for name, terms in self.items():
            for term in terms.terms:
                self._owners.setdefault(term, []).append(name)

    def found_in(self, text: str) -> frozenset[str]:
        """The names of the groups with a term in ``text``."""
        candidates = {
            name for term, names in self._owners.items() if term in text for name in names
        }
        return frozenset(name for name in candidates if self[name].any_in(text))


@dataclass
class Lexicon:
    symmetric: TermSet
    negation: TermSet
    opposites: TermPairs
    inverse: TermPairs
    passive: list[re.Pattern[str]]
    roles: TermGroups
    # Kinds of relation (capital of, part of, sponsor of, sued …) → their spellings.
    predicates: TermGroups = field(default_factory=lambda: TermGroups({}))
    ordinals: dict[str, int] = field(default_factory=dict)
    # Normalised names that only say "some relation" (GraphRAG and LightRAG write no name).
    generic: frozenset[str] = frozenset()
    # Words that make a relation directed: its reversed form is another fact (R2).
    directed: TermSet = field(default_factory=lambda: TermSet([]))
    # Receiving / undergoing markers: "received a loan from" against "granted a loan to"
    # is a direction flip although source and target stay where they are.
    receiving: TermSet = field(default_factory=lambda: TermSet([]))
    # An event (acquired, appointed, bought) and a lasting state (holds, owns, is CEO of)
    # of one pair are two facts, even with the same numbers (R6).
    events: TermSet = field(default_factory=lambda: TermSet([]))
    states: TermSet = field(default_factory=lambda: TermSet([]))
    # Verbs of change by direction ("up": increase, buy; "down": reduce, sell; "other"),
    # as patterns with their inflections: a change of a state is an event, never the state.
    change: dict[str, re.Pattern[str]] = field(default_factory=dict)
    # Words that explain a name without naming a kind of relation: function words and
    # modifiers that change no fact ("of", "the", "de", "的").
    function_words: TermSet = field(default_factory=lambda: TermSet([]))
    # Voice markers ("by", "par", 被, 由 …): they explain a name only where a passive
    # pattern recognised them.
    markers: TermSet = field(default_factory=lambda: TermSet([]))
    # What explains every word of a name of a known kind: the kinds' and roles' own
    # spellings and the function words; for a symmetric name, the symmetric words too.
    kind_words: TermSet = field(default_factory=lambda: TermSet([]))
    symmetric_words: TermSet = field(default_factory=lambda: TermSet([]))
    # What each relation name (normalised) says by itself: names repeat across a batch.
    name_cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


_TERM_KEYS = (
    "symmetric",
    "negation",
    "generic",
    "directed",
    "receiving",
    "events",
    "states",
    "passive",
    "function_words",
    "markers",
)
# Keys whose entries are regular expressions, not terms.
PATTERN_KEYS = frozenset({"passive", "change"})


def _files() -> list[tuple[str, str]]:
    folder = resources.files("relmerge.data.lexicon")
    return [
        (entry.name, entry.read_text(encoding="utf-8"))
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".toml")
    ]


def lexicon_digest() -> str:
    """sha256 of the shipped vocabulary: part of a run's fingerprint, as it decides."""
    digest = hashlib.sha256()
    for name, text in _files():
        digest.update(name.encode() + b"\0" + text.encode() + b"\0")
    return digest.hexdigest()


def shipped_vocabulary() -> list[dict[str, Any]]:
    """The parsed language files shipped in ``relmerge.data.lexicon``."""
    return [tomllib.loads(text) for _, text in _files()]


def vocabulary_entries(data: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(key, entry) for every term or pattern of one parsed file; a table's entries
    under ``table.group`` ("roles.ceo"), both sides of every pair under the pair's key."""
    for key, value in data.items():
        if isinstance(value, dict):
            for group, items in value.items():
                if isinstance(items, list):
                    yield from ((f"{key}.{group}", str(item)) for item in items)
                else:  # ordinals: spelled-out number → value
                    yield key, group
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, list):
                    yield from ((key, str(side)) for side in item)
                else:
                    yield key, str(item)


def vocabulary_without(data: Mapping[str, Any], drop: Callable[[str, str], bool]) -> dict[str, Any]:
    """One parsed file without the entries ``drop(key, entry)`` names; a pair goes with
    either of its sides (``vocabulary_entries`` gives the keys)."""
    kept: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            table: dict[str, Any] = {}
            for group, items in value.items():
                if isinstance(items, list):
                    table[group] = [i for i in items if not drop(f"{key}.{group}", str(i))]
                elif not drop(key, group):
                    table[group] = items
            kept[key] = table
        elif isinstance(value, list):
            kept[key] = [
                item
                for item in value
                if not any(
                    drop(key, str(side)) for side in (item if isinstance(item, list) else [item])
                )
            ]
        else:
            kept[key] = value
    return kept


@cache
def load_lexicon() -> Lexicon:
    """All language files shipped in ``relmerge.data.lexicon``, merged."""
    return build_lexicon(shipped_vocabulary())


def build_lexicon(files: Iterable[Mapping[str, Any]]) -> Lexicon:
    """One :class:`Lexicon` from parsed language files, merged."""
    terms: dict[str, list[str]] = {key: [] for key in _TERM_KEYS}
    opposites: list[list[str]] = []
    inverse: list[list[str]] = []
    roles: dict[str, list[str]] = {}
    predicates: dict[str, list[str]] = {}
    change: dict[str, list[str]] = {}
    ordinals: dict[str, int] = {}
    for data in files:
        for key in _TERM_KEYS:
            terms[key] += data.get(key, [])
        opposites += data.get("opposites", [])
        inverse += data.get("inverse", [])
        for role, spellings in data.get("roles", {}).items():
            roles.setdefault(role, []).extend(spellings)
        for predicate, spellings in data.get("predicates", {}).items():
            predicates.setdefault(predicate, []).extend(spellings)
        for direction, patterns in data.get("change", {}).items():
            change.setdefault(direction, []).extend(patterns)
        ordinals.update(
            {normalize_key_text(k): int(v) for k, v in data.get("ordinals", {}).items()}
        )
    kind_words = [
        *terms["function_words"],
        *(spelling for group in (roles, predicates) for s in group.values() for spelling in s),
    ]
    return Lexicon(
        symmetric=TermSet(terms["symmetric"]),
        negation=TermSet(terms["negation"]),
        opposites=TermPairs(opposites),
        inverse=TermPairs(inverse),
        passive=[re.compile(pattern) for pattern in terms["passive"]],
        roles=TermGroups(roles),
        predicates=TermGroups(predicates),
        ordinals=ordinals,
        generic=frozenset(normalize_key_text(name) for name in terms["generic"]),
        directed=TermSet(terms["directed"]),
        receiving=TermSet(terms["receiving"]),
        events=TermSet(terms["events"]),
        states=TermSet(terms["states"]),
        change={
            direction: re.compile("|".join(f"(?:{pattern})" for pattern in patterns))
            for direction, patterns in change.items()
            if patterns
        },
        function_words=TermSet(terms["function_words"]),
        markers=TermSet(terms["markers"]),
        kind_words=TermSet(kind_words),
        symmetric_words=TermSet([*kind_words, *terms["symmetric"]]),
    )


def lexicon_for(config: DeduplicateRelationsConfig) -> Lexicon:
    """The shipped vocabulary with the config's extra symmetric relation names."""
    lexicon = load_lexicon()
    if not config.symmetric_relations:
        return lexicon
    extra = [*lexicon.symmetric.terms, *config.symmetric_relations]
    words = TermSet([*lexicon.symmetric_words.terms, *config.symmetric_relations])
    return replace(lexicon, symmetric=TermSet(extra), symmetric_words=words, name_cache={})
