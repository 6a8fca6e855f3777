"""The fields of a merged relation: nothing a member said is silently dropped.

Where an LLM merged a group and saw every member's whole description, its validated
merged text is used (``relation`` of ``relation_merge``, ``relation_list[].Description``
of ``relation_cluster``). Otherwise — rules, a pairwise ``relation_judge`` verdict, or a
member cut short in the prompt — the description is the members' distinct descriptions
joined in input order by :data:`DESCRIPTION_SEPARATOR` (a newline; LightRAG's ``<SEP>``
would be split again by LightRAG's own readers).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from relmerge.model import ExtractedRelation
from relmerge.normalize import normalize_description, normalize_key_text

DESCRIPTION_SEPARATOR = "\n"


def joined_description(descriptions: Iterable[str]) -> str:
    """The distinct descriptions in order, joined; one that another contains is left out."""
    kept: list[tuple[str, str]] = []  # (comparison form, text)
    for text in descriptions:
        for part in text.split(DESCRIPTION_SEPARATOR):
            part = part.strip()
            form = normalize_description(part)
            if form and all(form != other for other, _ in kept):
                kept.append((form, part))
    forms = [form for form, _ in kept]
    return DESCRIPTION_SEPARATOR.join(
        text
        for index, (form, text) in enumerate(kept)
        if not any(form in other for j, other in enumerate(forms) if j != index and other != form)
    )


def merged_attributes(relations: Iterable[ExtractedRelation]) -> dict[str, str]:
    """Every member's attributes, the first value seen of each key winning."""
    attributes: dict[str, str] = {}
    for relation in relations:
        for key, value in relation.attributes.items():
            attributes.setdefault(key, value)
    return attributes


def rule_fields(members: Sequence[ExtractedRelation], lead: ExtractedRelation) -> dict[str, Any]:
    """Fields of a merge no LLM wrote: the ``lead``'s type and name (the member the group
    is shown as), every member's distinct description and attributes (input order)."""
    return {
        "type": lead.type,
        "name": lead.name,
        "description": joined_description(r.description for r in members),
        "attributes": merged_attributes(members),
    }


def keeps_every_description(merged: str, members: Iterable[str]) -> bool:
    """Whether ``merged`` holds every member description (comparison forms): the
    property a rule merge guarantees."""
    whole = normalize_key_text(merged)
    return all(
        normalize_description(part.strip()) in whole
        for text in members
        for part in text.split(DESCRIPTION_SEPARATOR)
        if part.strip()
    )
