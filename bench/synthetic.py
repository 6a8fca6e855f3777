"""Seeded generator of realistic ``ExtractedRelation`` dicts for benchmarks.

``generate(n, seed)`` returns ``n`` plain dicts with exactly the fields of the step's data
contract, in contract order::

    relation_id, chunk_id, document_id, source_entity_id, target_entity_id,
    source_entity_name, target_entity_name, type, name, description,
    attributes ({str: str}), source_chunk_ids ([chunk_id])

Every record is valid for relmerge and for the Heta reference step: non-blank strings,
``source_entity_id != target_entity_id``, unique ``relation_id``, one source chunk.

Structure of a batch
--------------------
* **Entity pool.** ``max(400, n // 4)`` entities of four kinds (person, company, city,
  university); about 8% have Chinese names. About 10% of the relations are Chinese (Chinese
  templates between Chinese-named entities, descriptions ending in "。"). Entity ids are
  ``entity_`` + 16 hex digits of a hash of (seed, index), so two entities never share an id
  even when they share a name.
* **Base records (~70%).** A relation template (``works_at``/employment,
  ``founded``/creation, ``acquired``/transaction, ``invested_in``/investment,
  ``located_in``/location, ``ceo_of``/employment, ``studied_at``/education,
  ``partnered_with``/partnership, ``born_in``/biography, ...) is filled with two pool
  entities of the kinds it needs, plus slot values (years, amounts in millions, roles,
  stakes). Each base record has its own exact key (source id, target id, name, type).
* **Exact-key duplicates (~30%).** A later mention of an earlier base key: same endpoint
  ids, same relation ``name`` and ``type``, a new relation id, usually in another chunk and
  document. Most duplicates pick a base key uniformly (so early keys collect a few mentions);
  15% go to a small set of "hot" keys (one per ~1,000 records, about 45 mentions each), like
  a headline fact repeated through a corpus. The duplicate's description is one of:

  - **identical** (~45%): the base description modulo case, whitespace runs, leading or
    trailing spaces and the sentence-final period ("。" for Chinese);
  - **different wording, same fact** (~35%): another phrasing template with the same slot
    values (these need an LLM to merge);
  - **hard negative** (~20%): the same template with a different year or amount (a second
    acquisition, another tenure), i.e. a distinct fact under the same key (templates
    without such values, like ``located_in``, get a paraphrase instead).

  About 20% of records omit their attributes (extractors are inconsistent); attributes of
  identical duplicates never contradict the base.
* **Surface noise.** About 1% of endpoint names are written full-width ("Ａｃｍｅ　Ｌａｂｓ")
  and about 1% are space-padded (" Acme Labs ", "Acme Labs  "), so ~2% of records carry
  each kind of noise; entity ids are unchanged (the upstream entity step resolved them).

Output is fully deterministic for a given ``(n, seed)``: only ``random.Random(seed)`` and
SHA-256 are used, never ``hash()`` or the clock.

Run ``python bench/synthetic.py N [SEED]`` to print a batch as JSONL plus a summary on stderr.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Shares of the batch (see the module docstring).
DUPLICATE_SHARE = 0.30
HOT_SHARE_OF_DUPLICATES = 0.15
RECORDS_PER_HOT_KEY = 1000
IDENTICAL_SHARE = 0.45  # of duplicates; the remainder splits into paraphrase / hard negative
PARAPHRASE_SHARE = 0.35
NO_ATTRIBUTES_SHARE = 0.20
FULL_WIDTH_SHARE = 0.01
PADDED_SHARE = 0.01
CJK_ENTITY_SHARE = 0.08
CJK_RELATION_SHARE = 0.10
CHUNKS_PER_DOCUMENT = 12

_FIRST_NAMES = (
    "Alice", "Bruno", "Chen", "Dana", "Elif", "Farid", "Grace", "Hiro", "Ines", "Jonas",
    "Kofi", "Lena", "Mateo", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tara",
    "Umar", "Vera", "Wei", "Ximena", "Yusuf", "Zoe",
)  # fmt: skip
_LAST_NAMES = (
    "Andersen", "Becker", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Haddad",
    "Ivanova", "Jensen", "Kowalski", "Lindqvist", "Moreau", "Nakamura", "Okafor", "Petrov",
    "Rossi", "Schmidt", "Tanaka", "Varga", "Walsh", "Yilmaz", "Zhang",
)  # fmt: skip
_COMPANY_STEMS = (
    "Acme", "Blue Harbor", "Cobalt", "Deltaware", "Evergreen", "Fjord", "Granite", "Helix",
    "Ionic", "Juniper", "Kestrel", "Lumen", "Meridian", "Nimbus", "Orchid", "Pioneer",
    "Quartz", "Redwood", "Sable", "Tidal", "Umbra", "Vertex", "Willow", "Zenith",
)  # fmt: skip
_COMPANY_SUFFIXES = (
    "Labs", "Systems", "Holdings", "Group", "Robotics", "Energy", "Bio", "Capital",
    "Logistics", "Media", "Foods", "Networks",
)  # fmt: skip
_CITIES = (
    "Amsterdam", "Bangalore", "Berlin", "Boston", "Cape Town", "Chicago", "Dublin",
    "Helsinki", "Lagos", "Lisbon", "Madrid", "Montreal", "Munich", "Nairobi", "Osaka",
    "Oslo", "Paris", "Prague", "Seattle", "Seoul", "Singapore", "Stockholm", "Sydney",
    "Toronto", "Vienna", "Warsaw", "Zurich",
)  # fmt: skip
_UNIVERSITY_PLACES = (
    "Northbridge", "Eastfield", "Westmoor", "Southgate", "Lakeside", "Highland", "Riverside",
    "Kingsport", "Ashford", "Brookhaven",
)  # fmt: skip
_CJK_SURNAMES = "王李张刘陈杨赵黄周吴徐孙马朱胡"
_CJK_GIVEN = ("伟", "芳", "娜", "敏", "静", "磊", "洋", "勇", "艳", "杰", "涛", "明", "超", "霞")
_CJK_COMPANY_STEMS = (
    "华信",
    "瑞丰",
    "恒通",
    "远航",
    "星河",
    "金桥",
    "天成",
    "新元",
    "海川",
    "嘉禾",
)
_CJK_COMPANY_SUFFIXES = ("科技有限公司", "集团", "控股有限公司", "能源股份有限公司")
_CJK_CITIES = ("上海", "北京", "深圳", "杭州", "成都", "武汉", "南京", "苏州", "西安", "广州")
_CJK_UNIVERSITIES = ("复旦大学", "浙江大学", "南京大学", "武汉大学", "中山大学", "四川大学")
_ROLES = ("engineer", "product manager", "chief scientist", "sales director", "analyst")
_CJK_ROLES = ("工程师", "产品经理", "首席科学家", "销售总监")

Slots = dict[str, str]


@dataclass(frozen=True)
class Entity:
    entity_id: str
    name: str
    kind: str  # person | company | city | university
    cjk: bool


@dataclass(frozen=True)
class Template:
    """One relation name/type with its endpoint kinds and phrasings.

    ``wordings`` are alternative phrasings of the same fact; ``slots`` name the values that
    make two mentions distinct facts; ``attributes`` maps attribute keys to slot names.
    """

    name: str
    type: str
    source_kind: str
    target_kind: str
    cjk: bool
    wordings: tuple[str, ...]
    slots: tuple[str, ...]
    attributes: tuple[tuple[str, str], ...]


_TEMPLATES: tuple[Template, ...] = (
    Template(
        "works_at", "employment", "person", "company", False,
        (
            "{s} has worked at {t} as {role} since {year}.",
            "{s} joined {t} in {year} and works there as {role}.",
            "Since {year}, {s} has been employed by {t} in the role of {role}.",
        ),
        ("year", "role"), (("since", "year"), ("role", "role")),
    ),
    Template(
        "founded", "creation", "person", "company", False,
        (
            "{s} founded {t} in {year}.",
            "{t} was founded by {s} in {year}.",
            "In {year}, {s} started the company {t}.",
        ),
        ("year",), (("year", "year"),),
    ),
    Template(
        "acquired", "transaction", "company", "company", False,
        (
            "{s} acquired {t} for ${amount} million in {year}.",
            "In {year}, {t} was bought by {s} in a deal worth ${amount} million.",
            "{s} completed its ${amount} million acquisition of {t} in {year}.",
        ),
        ("year", "amount"), (("year", "year"), ("amount_usd_millions", "amount")),
    ),
    Template(
        "invested_in", "investment", "company", "company", False,
        (
            "{s} invested ${amount} million in {t} in {year}.",
            "{t} raised ${amount} million from {s} in {year}.",
            "In {year}, {s} led a ${amount} million investment in {t}.",
        ),
        ("year", "amount"), (("year", "year"), ("amount_usd_millions", "amount")),
    ),
    Template(
        "located_in", "location", "company", "city", False,
        (
            "{s} is headquartered in {t}.",
            "The headquarters of {s} are in {t}.",
            "{s} has its main office in {t}.",
        ),
        (), (),
    ),
    Template(
        "ceo_of", "employment", "person", "company", False,
        (
            "{s} served as CEO of {t} from {year} to {end}.",
            "{s} was chief executive of {t} between {year} and {end}.",
            "From {year} until {end}, {t} was led by CEO {s}.",
        ),
        ("year", "end"), (("start", "year"), ("end", "end")),
    ),
    Template(
        "studied_at", "education", "person", "university", False,
        (
            "{s} graduated from {t} in {year}.",
            "{s} earned a degree at {t} in {year}.",
            "In {year}, {s} completed studies at {t}.",
        ),
        ("year",), (("graduation_year", "year"),),
    ),
    Template(
        "partnered_with", "partnership", "company", "company", False,
        (
            "{s} signed a partnership with {t} in {year}.",
            "{s} and {t} entered a strategic partnership in {year}.",
            "In {year}, {s} announced a partnership with {t}.",
        ),
        ("year",), (("year", "year"),),
    ),
    Template(
        "born_in", "biography", "person", "city", False,
        (
            "{s} was born in {t} in {year}.",
            "{s} is a native of {t}, born in {year}.",
            "Born in {year}, {s} grew up in {t}.",
        ),
        ("year",), (("birth_year", "year"),),
    ),
    Template(
        "owns_stake_in", "ownership", "company", "company", False,
        (
            "{s} owns a {stake}% stake in {t}.",
            "{s} holds {stake}% of the shares of {t}.",
            "A {stake}% stake in {t} belongs to {s}.",
        ),
        ("stake",), (("stake_percent", "stake"),),
    ),
    Template(
        "任职于", "雇佣", "person", "company", True,
        (
            "{s}自{year}年起在{t}担任{role}。",
            "{year}年，{s}加入{t}，任{role}。",
            "{s}从{year}年开始在{t}工作，职位是{role}。",
        ),
        ("year", "role"), (("起始年份", "year"), ("职位", "role")),
    ),
    Template(
        "位于", "地理位置", "company", "city", True,
        ("{s}总部位于{t}。", "{s}的总部设在{t}。", "{t}是{s}的总部所在地。"),
        (), (),
    ),
    Template(
        "投资", "投资", "company", "company", True,
        (
            "{s}于{year}年向{t}投资{amount}百万美元。",
            "{year}年，{t}获得{s}{amount}百万美元投资。",
            "{s}在{year}年对{t}进行了{amount}百万美元的投资。",
        ),
        ("year", "amount"), (("年份", "year"), ("金额_百万美元", "amount")),
    ),
    Template(
        "毕业于", "教育", "person", "university", True,
        (
            "{s}于{year}年毕业于{t}。",
            "{s}在{year}年从{t}毕业。",
            "{year}年，{s}完成了在{t}的学业。",
        ),
        ("year",), (("毕业年份", "year"),),
    ),
)  # fmt: skip

_TEMPLATES_BY_LANGUAGE: dict[bool, tuple[Template, ...]] = {
    cjk: tuple(t for t in _TEMPLATES if t.cjk == cjk) for cjk in (False, True)
}


def _hex16(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(str(part) for part in parts).encode("utf-8")).hexdigest()[:16]


def _entity_name(rng: random.Random, kind: str, cjk: bool) -> str:
    if cjk:
        if kind == "person":
            return rng.choice(_CJK_SURNAMES) + "".join(
                rng.choices(_CJK_GIVEN, k=rng.choice((1, 2)))
            )
        if kind == "company":
            return rng.choice(_CJK_COMPANY_STEMS) + rng.choice(_CJK_COMPANY_SUFFIXES)
        if kind == "city":
            return rng.choice(_CJK_CITIES)
        return rng.choice(_CJK_UNIVERSITIES)
    if kind == "person":
        return f"{rng.choice(_FIRST_NAMES)} {rng.choice(_LAST_NAMES)}"
    if kind == "company":
        return f"{rng.choice(_COMPANY_STEMS)} {rng.choice(_COMPANY_SUFFIXES)}"
    if kind == "city":
        return rng.choice(_CITIES)
    return f"University of {rng.choice(_UNIVERSITY_PLACES)}"


def _entity_pool(rng: random.Random, size: int, seed: int) -> dict[tuple[str, bool], list[Entity]]:
    kinds = ("person", "person", "company", "company", "company", "city", "university")
    pool: dict[tuple[str, bool], list[Entity]] = {}
    for index in range(size):
        kind = rng.choice(kinds)
        cjk = rng.random() < CJK_ENTITY_SHARE
        entity = Entity(
            f"entity_{_hex16('entity', seed, index)}", _entity_name(rng, kind, cjk), kind, cjk
        )
        pool.setdefault((kind, cjk), []).append(entity)
    # Every (kind, language) a template needs must have at least two entities.
    for template in _TEMPLATES:
        for kind in (template.source_kind, template.target_kind):
            bucket = pool.setdefault((kind, template.cjk), [])
            while len(bucket) < 2:
                index = size + sum(len(b) for b in pool.values())
                name = _entity_name(rng, kind, template.cjk)
                bucket.append(
                    Entity(f"entity_{_hex16('entity', seed, index)}", name, kind, template.cjk)
                )
    return pool


def _slot_values(rng: random.Random, template: Template) -> Slots:
    year = rng.randint(1990, 2024)
    values: Slots = {"year": str(year), "end": str(min(year + rng.randint(1, 12), 2025))}
    values["amount"] = str(rng.choice((5, 12, 40, 75, 120, 250, 480, 900, 1500, 3200)))
    values["stake"] = str(rng.choice((5, 10, 15, 20, 25, 33, 49, 51)))
    values["role"] = rng.choice(_CJK_ROLES if template.cjk else _ROLES)
    return {slot: values[slot] for slot in template.slots}


def _hard_negative_slots(rng: random.Random, template: Template, slots: Slots) -> Slots:
    """The same template with a different year / amount / stake: a distinct fact."""
    changed = dict(slots)
    if "amount" in changed:
        changed["amount"] = str(int(changed["amount"]) * rng.choice((2, 3, 10)))
    if "stake" in changed:
        changed["stake"] = str(int(changed["stake"]) + rng.choice((5, 10, 15)))
    if "year" in changed:
        year = int(changed["year"]) + rng.choice((-9, -5, -3, 2, 4, 7))
        changed["year"] = str(year)
        if "end" in changed:
            changed["end"] = str(year + rng.randint(1, 6))
    return changed


def _describe(template: Template, wording: int, source: str, target: str, slots: Slots) -> str:
    return template.wordings[wording].format(s=source, t=target, **slots)


def _attributes(template: Template, slots: Slots) -> dict[str, str]:
    return {key: slots[slot] for key, slot in template.attributes}


def _surface_variant(rng: random.Random, description: str, cjk: bool) -> str:
    """Equal to ``description`` modulo case, whitespace runs and the final period."""
    text = description
    period = "。" if cjk else "."
    if rng.random() < 0.5:
        text = text.removesuffix(period) if text.endswith(period) else text + period
    if not cjk:
        case = rng.random()
        if case < 0.3:
            text = text.lower()
        elif case < 0.4:
            text = text.upper()
        if rng.random() < 0.4:
            words = text.split(" ")
            at = rng.randrange(len(words))
            words[at] = words[at] + " "  # a double space
            text = " ".join(words)
    if rng.random() < 0.3:
        text = rng.choice((" ", "  ", "\t")) + text
    if rng.random() < 0.3:
        text = text + rng.choice((" ", "\n"))
    if text == description:  # always make it differ on the surface
        text = text + " "
    return text


def _full_width(text: str) -> str:
    return "".join(
        "\u3000" if ch == " " else chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch for ch in text
    )


def _noisy_name(rng: random.Random, name: str) -> str:
    roll = rng.random()
    if roll < FULL_WIDTH_SHARE and name.isascii():
        return _full_width(name)
    if roll < FULL_WIDTH_SHARE + PADDED_SHARE:
        return rng.choice((f" {name}", f"{name} ", f" {name} ", f"{name}  "))
    return name


@dataclass
class _Base:
    template: Template
    source: Entity
    target: Entity
    slots: Slots
    description: str
    attributes: dict[str, str]


def generate(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` relation dicts (see the module docstring); same ``(n, seed)``, same output."""
    if n < 0:
        raise ValueError("n must be >= 0")
    rng = random.Random(f"relmerge-bench:{seed}:{n}")
    pool = _entity_pool(rng, max(400, n // 4), seed)
    document_count = max(1, n // (CHUNKS_PER_DOCUMENT * 3))
    hot_key_count = max(1, n // RECORDS_PER_HOT_KEY)
    bases: list[_Base] = []
    used_keys: set[tuple[str, str, str, str]] = set()
    records: list[dict[str, Any]] = []

    for index in range(n):
        document = rng.randrange(document_count)
        chunk_id = f"chunk_{_hex16('chunk', seed, document, rng.randrange(CHUNKS_PER_DOCUMENT))}"
        document_id = f"doc_{_hex16('document', seed, document)}"

        if bases and rng.random() < DUPLICATE_SHARE:
            if rng.random() < HOT_SHARE_OF_DUPLICATES:
                base = bases[rng.randrange(min(hot_key_count, len(bases)))]
            else:
                base = rng.choice(bases)
            template, source, target = base.template, base.source, base.target
            kind = rng.random()
            if kind < IDENTICAL_SHARE:
                description = _surface_variant(rng, base.description, template.cjk)
                attributes = dict(base.attributes)
            elif kind < IDENTICAL_SHARE + PARAPHRASE_SHARE or not template.slots:
                wording = rng.randrange(1, len(template.wordings))
                description = _describe(template, wording, source.name, target.name, base.slots)
                attributes = dict(base.attributes)
            else:
                slots = _hard_negative_slots(rng, template, base.slots)
                wording = rng.randrange(len(template.wordings))
                description = _describe(template, wording, source.name, target.name, slots)
                attributes = _attributes(template, slots)
        else:
            for _ in range(50):
                cjk = rng.random() < CJK_RELATION_SHARE
                template = rng.choice(_TEMPLATES_BY_LANGUAGE[cjk])
                sources = pool[(template.source_kind, template.cjk)]
                targets = pool[(template.target_kind, template.cjk)]
                source, target = rng.choice(sources), rng.choice(targets)
                key = (source.entity_id, target.entity_id, template.name, template.type)
                if source.entity_id != target.entity_id and key not in used_keys:
                    break
            else:  # pool exhausted for this draw: accept a repeated key (vanishingly rare)
                while target.entity_id == source.entity_id:
                    target = rng.choice(targets)
            used_keys.add((source.entity_id, target.entity_id, template.name, template.type))
            slots = _slot_values(rng, template)
            description = _describe(template, 0, source.name, target.name, slots)
            attributes = _attributes(template, slots)
            bases.append(_Base(template, source, target, slots, description, attributes))

        if attributes and rng.random() < NO_ATTRIBUTES_SHARE:
            attributes = {}
        records.append(
            {
                "relation_id": f"relation_{_hex16('relation', seed, n, index)}",
                "chunk_id": chunk_id,
                "document_id": document_id,
                "source_entity_id": source.entity_id,
                "target_entity_id": target.entity_id,
                "source_entity_name": _noisy_name(rng, source.name),
                "target_entity_name": _noisy_name(rng, target.name),
                "type": template.type,
                "name": template.name,
                "description": description,
                "attributes": attributes,
                "source_chunk_ids": [chunk_id],
            }
        )
    return records


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts of a batch: records, distinct exact keys, duplicate groups, largest group."""
    keys = Counter(
        (r["source_entity_id"], r["target_entity_id"], r["name"], r["type"]) for r in records
    )
    return {
        "records": len(records),
        "distinct_keys": len(keys),
        "duplicate_records": len(records) - len(keys),
        "duplicate_groups": sum(1 for count in keys.values() if count > 1),
        "largest_group": max(keys.values(), default=0),
    }


# --------------------------------------------------------------------------------------
# Semantic batches: blocks of mentions per entity pair, in three languages, with labels.

SEMANTIC_LANGUAGES = (("en", 0.55), ("zh", 0.20), ("fr", 0.25))
SEMANTIC_MAX_BLOCK = 20
SEMANTIC_SURFACE_SHARE = 0.30  # of repeat mentions: a surface variant of an earlier one
SEMANTIC_REVERSED_SHARE = 0.35  # of mentions of a symmetric fact: endpoints swapped
SEMANTIC_FACT_COUNTS = ((1, 2, 3, 4), (0.45, 0.30, 0.15, 0.10))  # distinct facts per block
SEMANTIC_ROLES = {
    "en": ("engineer", "product manager", "sales director", "analyst", "chief scientist"),
    "zh": ("工程师", "产品经理", "销售总监", "分析师", "首席科学家"),
    "fr": ("ingénieur", "responsable produit", "directeur commercial", "analyste",
           "directeur scientifique"),
}  # fmt: skip


@dataclass(frozen=True)
class SemanticTemplate:
    """One fact kind in three languages: ``labels[lang] = (name, type)``, ``wordings[lang]``
    (``{s}``/``{t}`` endpoints, slots such as ``{year}``), ``attributes[lang]`` (key, slot)."""

    key: str
    source_kind: str
    target_kind: str
    symmetric: bool
    slots: tuple[str, ...]
    labels: dict[str, tuple[str, str]]
    wordings: dict[str, tuple[str, ...]]
    attributes: dict[str, tuple[tuple[str, str], ...]]


def _sem(
    key: str,
    kinds: tuple[str, str],
    symmetric: bool,
    slots: tuple[str, ...],
    en: tuple[str, str, tuple[str, ...], tuple[str, ...]],
    zh: tuple[str, str, tuple[str, ...], tuple[str, ...]],
    fr: tuple[str, str, tuple[str, ...], tuple[str, ...]],
) -> SemanticTemplate:
    """``en``/``zh``/``fr`` = (name, type, wordings, attribute keys in slot order)."""
    languages = {"en": en, "zh": zh, "fr": fr}
    return SemanticTemplate(
        key,
        kinds[0],
        kinds[1],
        symmetric,
        slots,
        {lang: (v[0], v[1]) for lang, v in languages.items()},
        {lang: v[2] for lang, v in languages.items()},
        {lang: tuple(zip(v[3], slots, strict=True)) for lang, v in languages.items()},
    )


_SEMANTIC_TEMPLATES: tuple[SemanticTemplate, ...] = (
    _sem("works_at", ("person", "company"), False, ("year", "role"),
         ("works at", "employment",
          ("{s} has worked at {t} as {role} since {year}.",
           "{s} joined {t} in {year} and works there as {role}.",
           "Since {year}, {s} has been working for {t} in the role of {role}."),
          ("since", "role")),
         ("任职于", "雇佣",
          ("{s}自{year}年起在{t}担任{role}。", "{year}年，{s}加入{t}，任{role}。"),
          ("起始年份", "职位")),
         ("travaille chez", "emploi",
          ("{s} travaille chez {t} comme {role} depuis {year}.",
           "En {year}, {s} a rejoint {t} en tant que {role}."),
          ("depuis", "poste"))),
    _sem("founded", ("person", "company"), False, ("year",),
         ("founded", "creation",
          ("{s} founded {t} in {year}.", "In {year}, {s} started the company {t}.",
           "{s} is the founder of {t}, established in {year}."),
          ("year",)),
         ("创立", "创建", ("{s}于{year}年创立了{t}。", "{year}年，{s}创办了{t}。"), ("年份",)),
         ("a fondé", "création",
          ("{s} a fondé {t} en {year}.", "En {year}, {s} a créé l'entreprise {t}."),
          ("année",))),
    _sem("ceo_of", ("person", "company"), False, ("year", "end"),
         ("ceo of", "employment",
          ("{s} served as CEO of {t} from {year} to {end}.",
           "{s} was chief executive of {t} between {year} and {end}."),
          ("start", "end")),
         ("首席执行官", "雇佣",
          ("{s}于{year}年至{end}年担任{t}首席执行官。", "{year}年到{end}年间，{s}出任{t}的CEO。"),
          ("起始年份", "结束年份")),
         ("pdg de", "emploi",
          ("{s} a été PDG de {t} de {year} à {end}.",
           "De {year} à {end}, {s} a dirigé {t} en tant que directeur général."),
          ("début", "fin"))),
    _sem("acquired", ("company", "company"), False, ("year", "amount"),
         ("acquired", "transaction",
          ("{s} acquired {t} for ${amount} million in {year}.",
           "{s} completed its ${amount} million acquisition of {t} in {year}."),
          ("year", "amount_usd_millions")),
         ("收购", "交易",
          ("{s}于{year}年以{amount}百万美元收购了{t}。",
           "{year}年，{s}斥资{amount}百万美元收购{t}。"),
          ("年份", "金额_百万美元")),
         ("a acquis", "transaction",
          ("{s} a acquis {t} pour {amount} millions de dollars en {year}.",
           "En {year}, {s} a racheté {t} pour {amount} millions de dollars."),
          ("année", "montant_millions_usd"))),
    _sem("invested_in", ("company", "company"), False, ("year", "amount"),
         ("invested in", "investment",
          ("{s} invested ${amount} million in {t} in {year}.",
           "In {year}, {s} led a ${amount} million investment in {t}."),
          ("year", "amount_usd_millions")),
         ("投资", "投资",
          ("{s}于{year}年向{t}投资{amount}百万美元。",
           "{year}年，{s}对{t}进行了{amount}百万美元的投资。"),
          ("年份", "金额_百万美元")),
         ("a investi dans", "investissement",
          ("{s} a investi {amount} millions de dollars dans {t} en {year}.",
           "En {year}, {s} a mené un investissement de {amount} millions de dollars dans {t}."),
          ("année", "montant_millions_usd"))),
    _sem("partnered_with", ("company", "company"), True, ("year",),
         ("partnered with", "partnership",
          ("{s} signed a partnership with {t} in {year}.",
           "{s} and {t} entered a strategic partnership in {year}.",
           "In {year}, {s} announced a partnership with {t}."),
          ("year",)),
         ("合作伙伴", "合作",
          ("{s}与{t}于{year}年建立了战略合作伙伴关系。", "{year}年，{s}和{t}宣布合作。"),
          ("年份",)),
         ("partenaire de", "partenariat",
          ("{s} a signé un partenariat avec {t} en {year}.",
           "En {year}, {s} et {t} ont conclu un partenariat stratégique."),
          ("année",))),
    _sem("competes_with", ("company", "company"), True, (),
         ("competes with", "competition",
          ("{s} competes with {t}.", "{s} and {t} are direct competitors."), ()),
         ("竞争对手", "竞争", ("{s}与{t}是竞争对手。", "{s}和{t}在市场上直接竞争。"), ()),
         ("rival de", "concurrence",
          ("{s} est un rival de {t}.", "{s} et {t} sont des concurrents directs."), ())),
    _sem("owns_stake_in", ("company", "company"), False, ("stake",),
         ("owns stake in", "ownership",
          ("{s} owns a {stake}% stake in {t}.", "{s} holds {stake}% of the shares of {t}."),
          ("stake_percent",)),
         ("持股", "所有权", ("{s}持有{t}{stake}%的股份。", "{s}持股{t}，比例为{stake}%。"),
          ("持股比例",)),
         ("détient une participation dans", "propriété",
          ("{s} détient une participation de {stake} % dans {t}.",
           "{s} possède {stake} % des actions de {t}."),
          ("participation_pourcent",))),
    _sem("married_to", ("person", "person"), True, ("year",),
         ("married to", "family",
          ("{s} married {t} in {year}.", "{s} and {t} got married in {year}."), ("year",)),
         ("配偶", "家庭", ("{s}与{t}于{year}年结婚。", "{year}年，{s}和{t}成婚。"), ("年份",)),
         ("marié à", "famille",
          ("{s} a épousé {t} en {year}.", "{s} et {t} se sont mariés en {year}."),
          ("année",))),
    _sem("located_in", ("company", "city"), False, (),
         ("headquartered in", "location",
          ("{s} is headquartered in {t}.", "The headquarters of {s} are in {t}."), ()),
         ("总部位于", "地理位置", ("{s}总部位于{t}。", "{s}的总部设在{t}。"), ()),
         ("siège à", "localisation",
          ("{s} a son siège à {t}.", "Le siège de {s} se trouve à {t}."), ())),
    _sem("born_in", ("person", "city"), False, ("year",),
         ("born in", "biography",
          ("{s} was born in {t} in {year}.", "{s} is a native of {t}, born in {year}."),
          ("birth_year",)),
         ("出生于", "生平", ("{s}{year}年出生于{t}。", "{s}生于{t}，出生年份为{year}年。"),
          ("出生年份",)),
         ("né à", "biographie",
          ("{s} est né à {t} en {year}.", "{s}, originaire de {t}, est né en {year}."),
          ("année_de_naissance",))),
    _sem("studied_at", ("person", "university"), False, ("year",),
         ("graduated from", "education",
          ("{s} graduated from {t} in {year}.", "{s} earned a degree at {t} in {year}."),
          ("graduation_year",)),
         ("毕业于", "教育", ("{s}于{year}年毕业于{t}。", "{s}在{year}年从{t}毕业。"),
          ("毕业年份",)),
         ("diplômé de", "éducation",
          ("{s} est diplômé de {t} depuis {year}.", "En {year}, {s} a obtenu son diplôme à {t}."),
          ("année_diplôme",))),
)  # fmt: skip


@dataclass(frozen=True)
class _SemanticFact:
    template: SemanticTemplate
    source: Entity
    target: Entity
    slots: tuple[tuple[str, str], ...]  # (slot, English value); roles are translated


def _semantic_slots(rng: random.Random, template: SemanticTemplate) -> dict[str, str]:
    year = rng.randint(1985, 2023)
    values = {
        "year": str(year),
        "end": str(min(year + rng.randint(1, 12), 2025)),
        "amount": str(rng.randrange(5, 500) * 10),
        "stake": str(rng.randint(5, 49)),
        "role": str(rng.randrange(len(SEMANTIC_ROLES["en"]))),  # index into SEMANTIC_ROLES
    }
    return {slot: values[slot] for slot in template.slots}


def _semantic_hard_negative(rng: random.Random, slots: dict[str, str]) -> dict[str, str]:
    """Another year / amount / stake / role: a distinct fact under the same name."""
    changed = dict(slots)
    slot = rng.choice(sorted(changed))
    if slot in ("year", "end"):
        shift = rng.choice((-9, -6, -3, -1, 1, 2, 4, 7))
        changed["year"] = str(int(changed["year"]) + shift)
        if "end" in changed:
            changed["end"] = str(int(changed["end"]) + shift)
    elif slot == "amount":
        changed["amount"] = str(
            int(changed["amount"]) + rng.choice((-1, 1, 2)) * 10 * rng.randint(3, 40)
        )
        if int(changed["amount"]) <= 0:
            changed["amount"] = str(int(slots["amount"]) * 2)
    elif slot == "stake":
        changed["stake"] = str(int(changed["stake"]) + rng.choice((-4, 3, 8, 15)))
    else:
        roles = len(SEMANTIC_ROLES["en"])
        changed["role"] = str((int(changed["role"]) + rng.randint(1, roles - 1)) % roles)
    return changed


def _semantic_values(slots: tuple[tuple[str, str], ...], lang: str) -> dict[str, str]:
    values = dict(slots)
    if "role" in values:
        values["role"] = SEMANTIC_ROLES[lang][int(values["role"])]
    return values


def _semantic_block_size(rng: random.Random) -> int:
    sizes = range(1, SEMANTIC_MAX_BLOCK + 1)
    return rng.choices(sizes, weights=[1 / size for size in sizes])[0]


GRAPHRAG_SINGLETON_SHARE = 0.90  # of blocks: one relation (real GraphRAG output: ~95%)


def _graphrag_block_size(rng: random.Random) -> int:
    return 1 if rng.random() < GRAPHRAG_SINGLETON_SHARE else rng.choice((2, 2, 2, 3, 4))


def _lengthened(rng: random.Random, description: str, texts: Sequence[str]) -> str:
    """``description`` continued with sentences of ``texts`` up to the length of one of
    them drawn at random (never cut below the fact's own sentence)."""
    target = len(rng.choice(texts))
    longer = description
    while len(longer) < target:
        longer = f"{longer} {rng.choice(texts)}"
    return longer[: max(target, len(description))].rstrip()


def _compatible(kinds: tuple[str, str]) -> list[tuple[SemanticTemplate, bool]]:
    """Templates that fit an endpoint pair of these kinds, and whether they run reversed."""
    found = []
    for template in _SEMANTIC_TEMPLATES:
        if (template.source_kind, template.target_kind) == kinds:
            found.append((template, False))
        if kinds[0] != kinds[1] and (template.target_kind, template.source_kind) == kinds:
            found.append((template, True))
    return found


def _block_facts(
    rng: random.Random, first: SemanticTemplate, a: Entity, b: Entity, count: int
) -> list[_SemanticFact]:
    """``count`` distinct facts (or fewer) between ``a`` and ``b``; the first uses ``first``."""
    facts = [_SemanticFact(first, a, b, tuple(sorted(_semantic_slots(rng, first).items())))]
    seen = {(first.key, a.entity_id, tuple(sorted(facts[0].slots)))}
    options = _compatible((a.kind, b.kind))
    for _ in range(count * 10):
        if len(facts) >= count:
            break
        base = rng.choice(facts)
        roll = rng.random()
        if roll < 0.5 and base.template.slots:  # hard negative: other year, amount, ...
            template, source, target = base.template, base.source, base.target
            slots = _semantic_hard_negative(rng, dict(base.slots))
        elif roll < 0.7 and a.kind == b.kind and not base.template.symmetric:
            template, source, target = base.template, base.target, base.source  # reversed
            slots = _semantic_slots(rng, template)
        else:
            template, reverse = rng.choice(options)
            source, target = (b, a) if reverse else (a, b)
            slots = _semantic_slots(rng, template)
        direction = a.entity_id if template.symmetric else source.entity_id
        key = (template.key, direction, tuple(sorted(slots.items())))
        if key not in seen:
            seen.add(key)
            facts.append(_SemanticFact(template, source, target, tuple(sorted(slots.items()))))
    return facts


GRAPHRAG_RELATIONS = (
    Path(__file__).resolve().parents[2]
    / "shared/data/real/graphrag-christmas-carol/relations.jsonl"
)


def graphrag_descriptions() -> list[str]:
    """The descriptions of real GraphRAG relations: the lengths ``shape="graphrag"`` draws."""
    lines = GRAPHRAG_RELATIONS.read_bytes().splitlines()
    return [json.loads(line)["description"] for line in lines if line.strip()]


def generate_semantic(
    n: int, seed: int = 0, shape: str = "semantic", texts: Sequence[str] = ()
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """A semantic-stage batch: ``(records, gold)``, ``gold`` = relation id -> fact label.

    ``shape="graphrag"`` gives the shape of real GraphRAG output instead: 90% of blocks
    hold one relation, the rest 2–4; ``max(400, n // 2)`` entities; each description is
    continued with sentences of ``texts`` (real descriptions) up to the length of one of
    them drawn at random, so lengths follow the real ones.

    Records have the same fields and validity as :func:`generate`'s. Structure:

    * **Blocks.** Records come in blocks: all mentions of one unordered entity pair
      (each pair is used by exactly one block). Block sizes run from 1 to 20 records with
      weight ``1/size`` (mean ~5.6; ~28% singletons); the last block is cut to fit ``n``.
      Endpoints come from the same entity pool as :func:`generate` (``max(400, n // 4)``
      entities, ~8% with Chinese names).
    * **Facts.** A block states 1–4 distinct facts (45/30/15/10%, at most one per record);
      each fact is one gold cluster (label ``fact_<hex>``). Twelve fact kinds, each in
      English, Chinese and French (``works_at``, ``founded``, ``ceo_of``, ``acquired``,
      ``invested_in``, ``partnered_with``, ``competes_with``, ``owns_stake_in``,
      ``married_to``, ``located_in``, ``born_in``, ``studied_at``); the first fact's kind
      fixes the endpoint kinds. A further fact of a block is a **hard negative** (50%, for
      kinds with values): the same kind with another year, amount, stake or role ("acquired
      for $300 million" vs "$450 million"; "since 2011" vs "since 2014"); or (20%, for two
      endpoints of one kind and a directed kind) the **reversed** fact ("B acquired A");
      or another kind that fits the endpoints (``works_at`` and ``founded``).
    * **Mentions.** Each fact gets at least one record; the others go to facts at random,
      the first fact weighted double. A mention's language is English 55%, Chinese 20%,
      French 25%, with that language's relation name and type ("works at"/"employment",
      "任职于"/"雇佣", "travaille chez"/"emploi"), a wording of that language (the first
      mention of a fact uses the first wording), values written in it (roles translated;
      "$450 million", "450百万美元", "450 millions de dollars"), and attributes with keys
      in that language (omitted in 20% of records). A repeat mention is a **surface
      variant** of an earlier one (30%: case, spaces, final period, as in :func:`generate`,
      same name/type/attributes) or any wording in any language (a paraphrase, often
      cross-language). Mentions of a **symmetric** fact (``partnered_with``,
      ``competes_with``, ``married_to``) swap their endpoints 35% of the time (still the
      same fact; the names are in relmerge's symmetric lexicon).
    * **Order.** Records are shuffled over the whole batch (mentions of one pair are spread
      through a corpus); ids, chunks and documents are assigned after shuffling.

    Deterministic for a given ``(n, seed)`` (``random.Random`` + SHA-256 only).
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    if shape not in ("semantic", "graphrag") or (shape == "graphrag" and not texts):
        raise ValueError("shape is 'semantic', or 'graphrag' with texts")
    graphrag = shape == "graphrag"
    rng = random.Random(f"relmerge-bench-{shape}:{seed}:{n}")
    pool = _entity_pool(rng, max(400, n // 2 if graphrag else n // 4), seed)
    block_size = _graphrag_block_size if graphrag else _semantic_block_size
    by_kind: dict[str, list[Entity]] = {}
    for (kind, _), entities in sorted(pool.items()):
        by_kind.setdefault(kind, []).extend(entities)
    languages = [lang for lang, _ in SEMANTIC_LANGUAGES]
    language_weights = [weight for _, weight in SEMANTIC_LANGUAGES]
    used_pairs: set[frozenset[str]] = set()
    mentions: list[tuple[dict[str, Any], str]] = []  # (record without ids, fact label)
    block = 0
    while len(mentions) < n:
        size = min(block_size(rng), n - len(mentions))
        template = rng.choice(_SEMANTIC_TEMPLATES)
        for _ in range(100):
            a = rng.choice(by_kind[template.source_kind])
            b = rng.choice(by_kind[template.target_kind])
            if (
                a.entity_id != b.entity_id
                and frozenset((a.entity_id, b.entity_id)) not in used_pairs
            ):
                break
        used_pairs.add(frozenset((a.entity_id, b.entity_id)))
        count = min(size, rng.choices(*SEMANTIC_FACT_COUNTS)[0])
        facts = _block_facts(rng, template, a, b, count)
        owners = list(range(len(facts)))
        weights = [2.0] + [1.0] * (len(facts) - 1)
        owners += rng.choices(range(len(facts)), weights=weights, k=size - len(facts))
        said: dict[int, list[dict[str, Any]]] = {}
        for owner in owners:
            fact = facts[owner]
            label = f"fact_{_hex16('semantic-fact', seed, n, block, owner)}"
            earlier = said.setdefault(owner, [])
            if earlier and rng.random() < SEMANTIC_SURFACE_SHARE:
                record = dict(rng.choice(earlier))
                cjk = any("\u4e00" <= ch <= "\u9fff" for ch in record["name"])
                record["description"] = _surface_variant(rng, record["description"], cjk)
                earlier.append(record)
                mentions.append((record, label))
                continue
            lang = rng.choices(languages, weights=language_weights)[0]
            wordings = fact.template.wordings[lang]
            wording = 0 if not earlier else rng.randrange(len(wordings))
            source, target = fact.source, fact.target
            if fact.template.symmetric and rng.random() < SEMANTIC_REVERSED_SHARE:
                source, target = target, source
            values = _semantic_values(fact.slots, lang)
            attributes = {key: values[slot] for key, slot in fact.template.attributes[lang]}
            if attributes and rng.random() < NO_ATTRIBUTES_SHARE:
                attributes = {}
            name, kind = fact.template.labels[lang]
            record = {
                "source_entity_id": source.entity_id,
                "target_entity_id": target.entity_id,
                "source_entity_name": source.name,
                "target_entity_name": target.name,
                "type": kind,
                "name": name,
                "description": wordings[wording].format(s=source.name, t=target.name, **values),
                "attributes": attributes,
            }
            if graphrag:
                record["description"] = _lengthened(rng, record["description"], texts)
            earlier.append(record)
            mentions.append((record, label))
        block += 1

    rng.shuffle(mentions)
    document_count = max(1, n // (CHUNKS_PER_DOCUMENT * 3))
    records: list[dict[str, Any]] = []
    gold: dict[str, str] = {}
    for index, (mention, label) in enumerate(mentions):
        document = rng.randrange(document_count)
        chunk = rng.randrange(CHUNKS_PER_DOCUMENT)
        chunk_id = f"chunk_{_hex16('semantic-chunk', seed, document, chunk)}"
        relation_id = f"relation_{_hex16('semantic-relation', seed, n, index)}"
        records.append(
            {
                "relation_id": relation_id,
                "chunk_id": chunk_id,
                "document_id": f"doc_{_hex16('semantic-document', seed, document)}",
                **{key: mention[key] for key in _SEMANTIC_FIELDS},
                "attributes": dict(mention["attributes"]),
                "source_chunk_ids": [chunk_id],
            }
        )
        gold[relation_id] = label
    return records, gold


_SEMANTIC_FIELDS = (
    "source_entity_id",
    "target_entity_id",
    "source_entity_name",
    "target_entity_name",
    "type",
    "name",
    "description",
)


def semantic_summary(records: list[dict[str, Any]], gold: dict[str, str]) -> dict[str, Any]:
    """Counts of a semantic batch: blocks, facts (gold clusters), languages, gold pairs."""
    blocks = Counter(frozenset((r["source_entity_id"], r["target_entity_id"])) for r in records)
    facts = Counter(gold.values())
    return {
        "records": len(records),
        "blocks": len(blocks),
        "largest_block": max(blocks.values(), default=0),
        "facts": len(facts),
        "gold_pairs": sum(c * (c - 1) // 2 for c in facts.values()),
        "candidate_pairs": sum(c * (c - 1) // 2 for c in blocks.values()),
    }


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print("usage: python bench/synthetic.py N [SEED]", file=sys.stderr)
        return 2
    records = generate(int(argv[0]), int(argv[1]) if len(argv) == 2 else 0)
    for record in records:
        sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(json.dumps(summary(records)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
