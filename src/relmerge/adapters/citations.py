"""Citations of relationships in GraphRAG report text, pointed at the rows that remain.

GraphRAG's community reports cite relationships by ``human_readable_id`` inside data
references: ``[Data: Entities (3); Relationships (12, 45, +more)]``. When relmerge merges
row 45 into row 12, the citation must name 12 once: ``Relationships (12, +more)``.
Citations of rows that were not merged away are left exactly as written (spacing, order,
``+more``), so a report that cites only kept rows is unchanged byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

_CITATION = re.compile(r"(?P<head>\bRelationships?\s*\()(?P<ids>[^()\[\]]*)(?P<tail>\))", re.I)
_NUMBER = re.compile(r"^\d+$")


@dataclass
class CitationRewriter:
    """Rewrites citations through ``moved`` (merged-away id → kept row's id, as text)."""

    moved: Mapping[str, str]
    rewritten: list[tuple[str, str]] = field(default_factory=list)  # (before, after)

    def _one(self, match: re.Match[str]) -> str:
        tokens = match["ids"].split(",")
        if not any(token.strip() in self.moved for token in tokens):
            return match[0]
        kept: list[str] = []
        seen: set[str] = set()
        for token in tokens:
            item = token.strip()
            if _NUMBER.match(item):
                item = self.moved.get(item, item)
                if item in seen:
                    continue
                seen.add(item)
            kept.append(item)
        after = f"{match['head']}{', '.join(kept)}{match['tail']}"
        self.rewritten.append((match[0], after))
        return after

    def rewrite(self, text: str) -> str:
        """``text`` with its relationship citations rewritten (the same object if none
        needed it)."""
        if not self.moved:
            return text
        return _CITATION.sub(self._one, text)
