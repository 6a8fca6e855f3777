"""Text normalisation for grouping keys and for comparing descriptions.

Stored text keeps its original (trimmed) form; these functions only build comparison keys.
NFKC folds full-width Latin letters and digits to their ASCII forms ("ＣＥＯ" -> "CEO"),
case-folding makes "Has District" equal "has district", and runs of whitespace collapse so
that stray double spaces from extraction do not split a group.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from relmerge.model import ExtractedRelation

ExactKey = tuple[str, str, str, str]

_SPACE_RUN = re.compile(r"\s+")
# Sentence-final punctuation an extractor adds or omits at random; it carries no meaning.
_TRAILING_PUNCT = ".。!！;；,，"


def normalize_key_text(text: str) -> str:
    """Key form of a relation name or type: NFKC, case-folded, whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _SPACE_RUN.sub(" ", folded).strip()


def normalize_description(text: str) -> str:
    """Comparison form of a description: key form without sentence-final punctuation."""
    return normalize_key_text(text).rstrip(_TRAILING_PUNCT).rstrip()


def exact_key(relation: ExtractedRelation) -> ExactKey:
    """The exact stage's grouping key: mapped source id, mapped target id, key forms of
    name and type. The kernel reads it too: a question about one key's records is the
    exact stage's question, answered with the same merged text."""
    return (
        relation.source_entity_id,
        relation.target_entity_id,
        normalize_key_text(relation.name),
        normalize_key_text(relation.type),
    )
