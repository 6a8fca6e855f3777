"""The description text of a relation, embedded for scoring.

Inside a block both endpoints are the same entities, so what is embedded is the relation
itself: its description and attribute values, without endpoint names or type label (type
labels differ by language — "空间关系" / "spatial" — without changing the fact). The name
is embedded apart (names repeat: each distinct name once); a pair's cosine combines the
two where the name is evidence, and uses the description alone where it is not
(``relmerge.decide.scores``).
"""

from __future__ import annotations

from relmerge.model import ExtractedRelation


def embedding_text(relation: ExtractedRelation, description_chars: int) -> str:
    """Description and attribute values (the name stands in for an empty description)."""
    description = relation.description[:description_chars]
    attributes = " ".join(f"{k}: {v}" for k, v in relation.attributes.items())
    return f"{description} {attributes}".strip() or relation.name
