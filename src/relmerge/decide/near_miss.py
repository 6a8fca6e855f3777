"""Near-miss canaries: two different facts about a block's own two entities, alike in words.

The rule-certain canaries (a copy of a record, a known-directed relation against its
reversed twin) are easier than the questions a run leaves to its model: a weak model
answers them right and still lumps related facts together where it matters ("marries"
with "travels with", "crowned in" with "rules from"). So a request that carries canaries
also carries one near-miss pair: two sentences about the block's entities A and B from
one family of facts — signing an agreement and ending it, lending and borrowing,
praising and criticising, holding a stake and selling it, teaching and studying under —
in the language of the block's records (a block written in two languages gets one
sentence in each). They state two different facts by construction, whatever A and B are,
so the certain answer is "keep both"; a model that merges them is guessing.

The families are general facts of each language, written for this purpose (none comes
from a labelled set). This module is pure: the sentences, the block's language, and a
shown record made of a sentence.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

Sentence = tuple[str, str]  # relation name, description; "{a}" and "{b}" name the entities
Family = tuple[Sentence, Sentence]  # two different facts of one kind

FAMILIES: dict[str, tuple[Family, ...]] = {
    "en": (
        (
            ("signed an agreement with", "{a} signed a cooperation agreement with {b} in 2014."),
            ("ended its agreement with", "{a} ended its cooperation agreement with {b} in 2019."),
        ),
        (
            ("lent money to", "{a} lent two million euros to {b}."),
            ("borrowed money from", "{a} borrowed two million euros from {b}."),
        ),
        (
            ("praised", "{a} publicly praised {b} after the meeting."),
            ("criticised", "{a} publicly criticised {b} after the meeting."),
        ),
        (
            ("holds a stake in", "{a} holds a 30% stake in {b}."),
            ("sold its stake in", "{a} sold its 30% stake in {b}."),
        ),
        (
            ("fought alongside", "{a} fought alongside {b} in the border war."),
            ("fought against", "{a} fought against {b} in the border war."),
        ),
        (
            ("sued", "{a} filed a lawsuit against {b} over unpaid fees."),
            ("settled with", "{a} settled its dispute with {b} over unpaid fees out of court."),
        ),
        (
            ("taught", "{a} taught {b} at the academy for three years."),
            ("studied under", "{a} studied under {b} at the academy for three years."),
        ),
        (
            ("first visited", "{a} first visited {b} in 1998."),
            ("last visited", "{a} last visited {b} in 2006."),
        ),
        (
            ("supplies parts to", "{a} supplies machine parts to {b}."),
            ("buys parts from", "{a} buys machine parts from {b}."),
        ),
        (
            ("hired", "{a} hired {b} in 2010."),
            ("dismissed", "{a} dismissed {b} in 2015."),
        ),
    ),
    "zh": (
        (
            ("签署合作协议", "{a}于2014年与{b}签署了合作协议。"),
            ("终止合作协议", "{a}于2019年终止了与{b}的合作协议。"),
        ),
        (
            ("借款给", "{a}向{b}借出了两百万欧元。"),
            ("向其借款", "{a}向{b}借入了两百万欧元。"),
        ),
        (
            ("公开赞扬", "会后{a}公开赞扬了{b}。"),
            ("公开批评", "会后{a}公开批评了{b}。"),
        ),
        (
            ("持股", "{a}持有{b}30%的股份。"),
            ("出售股份", "{a}出售了所持{b}30%的股份。"),
        ),
        (
            ("并肩作战", "{a}在边境战争中与{b}并肩作战。"),
            ("交战", "{a}在边境战争中与{b}交战。"),
        ),
        (
            ("起诉", "{a}因拖欠费用起诉了{b}。"),
            ("庭外和解", "{a}与{b}就拖欠费用的纠纷达成了庭外和解。"),
        ),
        (
            ("教导", "{a}在学院教导{b}三年。"),
            ("师从", "{a}在学院师从{b}三年。"),
        ),
        (
            ("首次访问", "{a}于1998年首次访问{b}。"),
            ("最后一次访问", "{a}于2006年最后一次访问{b}。"),
        ),
        (
            ("供应零件", "{a}向{b}供应机械零件。"),
            ("采购零件", "{a}从{b}采购机械零件。"),
        ),
        (
            ("聘用", "{a}于2010年聘用了{b}。"),
            ("解雇", "{a}于2015年解雇了{b}。"),
        ),
    ),
    "fr": (
        (
            ("a signé un accord avec", "{a} a signé un accord de coopération avec {b} en 2014."),
            ("a rompu l'accord avec", "{a} a rompu son accord de coopération avec {b} en 2019."),
        ),
        (
            ("a prêté à", "{a} a prêté deux millions d'euros à {b}."),
            ("a emprunté à", "{a} a emprunté deux millions d'euros à {b}."),
        ),
        (
            ("a salué", "{a} a salué publiquement {b} après la réunion."),
            ("a critiqué", "{a} a critiqué publiquement {b} après la réunion."),
        ),
        (
            ("détient une participation dans", "{a} détient une participation de 30 % dans {b}."),
            ("a vendu sa participation dans", "{a} a vendu sa participation de 30 % dans {b}."),
        ),
        (
            ("a combattu aux côtés de", "{a} a combattu aux côtés de {b} pendant la guerre."),
            ("a combattu contre", "{a} a combattu contre {b} pendant la guerre."),
        ),
        (
            ("a poursuivi", "{a} a intenté un procès à {b} pour des honoraires impayés."),
            ("a transigé avec", "{a} a réglé à l'amiable son litige avec {b} sur des honoraires."),
        ),
        (
            ("a enseigné à", "{a} a enseigné à {b} à l'académie pendant trois ans."),
            ("a étudié auprès de", "{a} a étudié auprès de {b} à l'académie pendant trois ans."),
        ),
        (
            ("a visité pour la première fois", "{a} a visité {b} pour la première fois en 1998."),
            ("a visité pour la dernière fois", "{a} a visité {b} pour la dernière fois en 2006."),
        ),
        (
            ("fournit des pièces à", "{a} fournit des pièces mécaniques à {b}."),
            ("achète des pièces à", "{a} achète des pièces mécaniques à {b}."),
        ),
        (
            ("a embauché", "{a} a embauché {b} en 2010."),
            ("a licencié", "{a} a licencié {b} en 2015."),
        ),
    ),
}

_HAN = re.compile(r"[\u3400-\u9fff]")
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_FRENCH = frozenset(
    [
        "le",
        "la",
        "les",
        "des",
        "du",
        "une",
        "est",
        "sont",
        "avec",
        "dans",
        "pour",
        "sur",
        "et",
        "au",
        "aux",
        "qui",
        "que",
        "été",
        "son",
        "sa",
        "ses",
        "leur",
        "par",
        "entre",
        "depuis",
    ]
)
_ENGLISH = frozenset(
    [
        "the",
        "of",
        "and",
        "is",
        "are",
        "was",
        "were",
        "with",
        "in",
        "for",
        "on",
        "to",
        "by",
        "at",
        "from",
        "his",
        "her",
        "its",
        "their",
        "who",
        "that",
        "between",
        "since",
    ]
)


def language_of(text: str) -> str:
    """The language of a description, as far as the families go: ``zh`` where Han
    characters are, ``fr`` where French function words outnumber English ones, else
    ``en`` (the families' language for every other)."""
    if _HAN.search(text):
        return "zh"
    words = [word.lower() for word in _WORD.findall(text)]
    french = sum(word in _FRENCH for word in words)
    english = sum(word in _ENGLISH for word in words)
    return "fr" if french > english else "en"


def block_languages(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The languages of ``records``' descriptions, the most common first."""
    counted = Counter(language_of(str(r.get("description") or "")) for r in records)
    return [language for language, _ in counted.most_common()] or ["en"]


def endpoints(record: Mapping[str, Any]) -> tuple[str, str]:
    """Entity A's and entity B's names as a shown record gives them."""
    source = str(record.get("source_entity_name") or "A")
    target = str(record.get("target_entity_name") or "B")
    return (target, source) if record.get("direction") == "B->A" else (source, target)


def near_miss_pair(
    records: Sequence[Mapping[str, Any]], draw: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two shown records (ids left to the caller) stating two different facts about the
    entities of ``records``, shaped like ``records[0]``; ``draw`` picks the family, the
    order and, in a block of two languages, which fact is in which."""
    languages = block_languages(records)
    first_language = languages[0]
    second_language = languages[1] if len(languages) > 1 else first_language
    families = FAMILIES[first_language]
    family = families[draw % len(families)]
    index = (draw // len(families)) % 2
    other = FAMILIES[second_language][draw % len(families)]
    chosen = (family[index], other[1 - index])
    a, b = endpoints(records[0])
    shape = records[0]
    out = []
    for name, description in chosen:
        text = description.format(a=a, b=b)  # braces in a name are not read again
        record = {k: v for k, v in shape.items() if k not in ("merged_from", "mentions")}
        record.update(
            source_entity_name=a,
            target_entity_name=b,
            name=name if shape.get("name") else shape.get("name"),
            description=text,
            attributes={},
        )
        if "direction" in shape:
            record["direction"] = "A->B"
        out.append(record)
    return out[0], out[1]
