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
from dataclasses import dataclass
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
