"""Context shared by the semantic prompts: the two entities and their profiles, as the
prompts show them (the entities themselves are values: :class:`relmerge.model.EntityContext`)."""

from __future__ import annotations

from typing import Any

from relmerge.model import EntityContext, ExtractedRelation
from relmerge.prompts.base import fenced_json, truncate


def entity_data(entity: EntityContext, profile_chars: int = 800) -> dict[str, str]:
    """Name, type and profile as prompt data: extracted text, so never outside a block."""
    data = {"name": entity.name}
    if entity.type:
        data["type"] = entity.type
    if entity.profile:
        data["profile"] = truncate(entity.profile, profile_chars)
    return data


def entity_block(entities: tuple[EntityContext, EntityContext]) -> str:
    """The two entities of a block as a fenced JSON object ``{"A": …, "B": …}``.

    It follows the records block: readers of the wire contract take the first ``json``
    block of the message as the records.
    """
    return "Entities A and B:\n" + fenced_json(
        {"A": entity_data(entities[0]), "B": entity_data(entities[1])}
    )


RULES = """Rules for "same fact":
1. Same fact = the same relationship between the same two entities, whatever the wording,
   language, relation name, type label or description length.
2. Direction matters unless the relation is symmetric (married to, sibling of, friend of,
   ally of, rival of, enemy of, borders, partner of...). Records with swapped entities of a
   non-symmetric relation are different facts, even when one is the inverse of the other
   ("B part of A" / "A contains B"; "A acquired B" / "B acquired A").
3. Time: the same relation in different, non-overlapping periods is different facts. When
   the pair has a single period, a dated and an undated mention are the same fact.
4. Roles: different roles (CEO / CTO, member / commander) are different facts. A generic
   relation (works for, serves) is the same as a specific role only when the profiles show
   exactly one role for this pair.
5. An event (acquired in 2006, betrayed, appointed, captured, founded) and a lasting state
   (parent company of, friend of, CEO of) are different facts; a title that only names the
   participant of one event is that event (founded = co-founder of).
6. Numbers: different quantities are different facts; the same quantity written
   differently (20% / one-fifth / 百分之二十 / 5,000 / 5 000) is the same fact.
7. Opposite meanings (ally / enemy, supports / opposes) are different facts.
8. Near-synonyms (ally / companion) are one relationship for some pairs and two aspects
   for others: the profiles and descriptions decide."""


def directed_record(
    relation: ExtractedRelation, forward: tuple[str, str], description_chars: int
) -> dict[str, Any]:
    """A relation as the semantic prompts show it, with its direction relative to A → B."""
    return {
        "relation_id": relation.relation_id,
        "source_entity_name": relation.source_entity_name,
        "target_entity_name": relation.target_entity_name,
        "direction": "A->B"
        if (relation.source_entity_id, relation.target_entity_id) == forward
        else "B->A",
        "type": relation.type,
        "name": relation.name,
        "description": truncate(relation.description, description_chars),
        "attributes": relation.attributes,
    }
