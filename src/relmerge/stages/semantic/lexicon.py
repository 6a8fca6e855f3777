"""The guard and symmetry vocabulary, loaded from ``relmerge/data/lexicon/*.toml``.

Every language file is merged into one :class:`Lexicon`; terms are compiled once into
matchers that respect word boundaries for Latin script and match CJK as substrings.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

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


@dataclass
class Lexicon:
    symmetric: TermSet
    negation: TermSet
    opposites: list[tuple[TermSet, TermSet]]
    inverse: list[tuple[TermSet, TermSet]]
    passive: list[re.Pattern[str]]
    roles: dict[str, TermSet]
    ordinals: dict[str, int] = field(default_factory=dict)
    # Normalised names that only say "some relation" (GraphRAG and LightRAG write no name).
    generic: frozenset[str] = frozenset()
    # What each relation name (normalised) says by itself: names repeat across a batch.
    name_cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def _pairs(raw: list[list[str]]) -> list[tuple[TermSet, TermSet]]:
    return [(TermSet([left]), TermSet([right])) for left, right in raw]


@cache
def load_lexicon() -> Lexicon:
    """All language files shipped in ``relmerge.data.lexicon``, merged."""
    symmetric: list[str] = []
    negation: list[str] = []
    opposites: list[list[str]] = []
    inverse: list[list[str]] = []
    passive: list[str] = []
    roles: dict[str, list[str]] = {}
    ordinals: dict[str, int] = {}
    generic: list[str] = []
    folder = resources.files("relmerge.data.lexicon")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".toml"):
            continue
        data = tomllib.loads(entry.read_text(encoding="utf-8"))
        symmetric += data.get("symmetric", [])
        negation += data.get("negation", [])
        opposites += data.get("opposites", [])
        inverse += data.get("inverse", [])
        passive += data.get("passive", [])
        generic += data.get("generic", [])
        for role, spellings in data.get("roles", {}).items():
            roles.setdefault(role, []).extend(spellings)
        ordinals.update(
            {normalize_key_text(k): int(v) for k, v in data.get("ordinals", {}).items()}
        )
    return Lexicon(
        symmetric=TermSet(symmetric),
        negation=TermSet(negation),
        opposites=_pairs(opposites),
        inverse=_pairs(inverse),
        passive=[re.compile(pattern) for pattern in passive],
        roles={role: TermSet(spellings) for role, spellings in roles.items()},
        ordinals=ordinals,
        generic=frozenset(normalize_key_text(name) for name in generic),
    )
