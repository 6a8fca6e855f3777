"""Context shared by the semantic prompts: the two entities and their profiles."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relmerge.model import ExtractedRelation
from relmerge.prompts.base import truncate


@dataclass(frozen=True)
class EntityContext:
    entity_id: str
    name: str
    profile: str | None = None
    type: str | None = None

    def describe(self, label: str, profile_chars: int = 800) -> str:
        line = f"Entity {label}: {self.name} (records may name it in another language)"
        if self.type:
            line += f" ({self.type})"
        if self.profile:
            line += f"\n  profile: {self.profile[:profile_chars]}"
        return line


RULES = """Two records state DIFFERENT facts (keep both) when one of these differs:
- direction of a non-symmetric relation ("A acquired B" / "B acquired A"), even an inverse
  ("B part of A" / "A contains B");
- period, when the periods do not overlap (CEO 1998-2009 / CEO since 2017);
- role (CEO / CTO, member / commander); a generic relation (works for) is the same as a
  specific role only when the profiles show one role for this pair;
- kind: an event (acquired in 2006, betrayed, captured, founded) versus a lasting state
  (parent company of, friend of, CEO of); a title naming the participant of one event is
  that event (founded = co-founder of);
- quantity (20% / 35%); the same quantity written differently (20% / one-fifth /
  百分之二十) is not a difference;
- meaning: opposites (ally / enemy, supports / opposes), or a different relationship
  (friend of / betrayed), or near-synonyms that the profiles show to be two aspects of this
  pair (ally / companion can be one bond for one pair and two for another).
Otherwise they state the SAME fact (merge): language, translation, aliases or localised
names of A and B, relation name, type label, wording, description length, a detail given
by only one record, and the direction of a symmetric relation (married to, sibling of,
friend of, ally of, rival of, borders, partner of...) are not differences."""


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
