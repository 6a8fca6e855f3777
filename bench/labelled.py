"""Labelled data sets for the bench scripts, each with what measuring it needs.

A :class:`Labelled` set is a list of relation records with a gold cluster per record
(same cluster = same fact), the entity mapping and profiles that go with them, the
documented hard negatives and the pairs left out of every count as doubtful. Sets:

* ``dev:geo``, ``dev:novel``, ``dev:tech`` — the three domains of ``../shared/data/dev``
  (a record's domain is in its ``document_id``: ``doc_<domain>_<lang>_…``);
* ``real:<source>`` — the five real graphs of ``bench/real_sources.py``, with the labels of
  ``bench/data/real_labels`` (records outside every labelled block are singletons);
* ``synthetic:held-out-kinds`` — ``tests/data/held_out_kinds``: events of change against
  states and inverse markers apart from their verb, in zh/en/fr, in domains the dev set
  does not have (finance stakes, sports transfers, succession); written after the
  vocabulary, labelled by the dev README's rules, used by no threshold.

:func:`pair_counts` scores a run's id mapping against a set: pairs inside blocks (the
only pairs relmerge may merge; gold facts never cross an entity pair), doubtful pairs
left out.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from real_sources import REPO, SHARED, SOURCES, load_source

DEV = SHARED / "dev"
DOMAINS = ("geo", "novel", "tech")
LABELS = REPO / "bench" / "data" / "real_labels"
HELD_OUT_KINDS = REPO / "tests" / "data" / "held_out_kinds"


@dataclass
class Labelled:
    name: str
    records: list[dict[str, Any]]
    gold: dict[str, str]
    mapping: dict[str, str] = field(default_factory=dict)
    entities: list[dict[str, Any]] = field(default_factory=list)
    hard_negatives: set[frozenset[str]] = field(default_factory=set)  # cluster pairs
    doubtful: set[frozenset[str]] = field(default_factory=set)  # relation id pairs

    def ends(self, record: dict[str, Any]) -> tuple[str, str]:
        return (
            self.mapping.get(record["source_entity_id"], record["source_entity_id"]),
            self.mapping.get(record["target_entity_id"], record["target_entity_id"]),
        )

    def blocks(self) -> list[list[str]]:
        """Relation ids per canonical unordered entity pair (two or more records)."""
        grouped: dict[frozenset[str], list[str]] = defaultdict(list)
        for record in self.records:
            source, target = self.ends(record)
            if source != target:
                grouped[frozenset((source, target))].append(record["relation_id"])
        return [ids for ids in grouped.values() if len(ids) > 1]


def domain_of(record: dict[str, Any]) -> str:
    return str(record["document_id"]).split("_")[1]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _hard_negatives(folder: Path) -> set[frozenset[str]]:
    rows = _jsonl(folder / "hard_negatives.jsonl")
    return {frozenset((p["cluster_a"], p["cluster_b"])) for p in rows}


def load_dev(domain: str, dev: Path = DEV) -> Labelled:
    records = [r for r in _jsonl(dev / "relations.jsonl") if domain_of(r) == domain]
    gold = {row["relation_id"]: row["cluster"] for row in _jsonl(dev / "gold.jsonl")}
    hard = _hard_negatives(dev)
    return Labelled(
        f"dev:{domain}",
        records,
        {r["relation_id"]: gold[r["relation_id"]] for r in records},
        json.loads((dev / "entity_id_mapping.json").read_text(encoding="utf-8")),
        _jsonl(dev / "entities.jsonl"),
        hard,
    )


def load_real(source: str, shared: Path = SHARED) -> Labelled:
    records = load_source(source, shared)
    gold = {r["relation_id"]: f"single:{r['relation_id']}" for r in records}
    doubtful: set[frozenset[str]] = set()
    for line_number, block in enumerate(_jsonl(LABELS / f"{source}.jsonl")):
        for index, cluster in enumerate(block["clusters"]):
            for member in cluster["members"]:
                gold[member] = f"{source}:{line_number}:{index}"
        doubtful |= {frozenset(item["pair"]) for item in block["doubtful"]}
    return Labelled(f"real:{source}", records, gold, doubtful=doubtful)


def load_held_out_kinds(folder: Path = HELD_OUT_KINDS) -> Labelled:
    """The synthetic held-out set: canonical ids already, no entity profiles."""
    gold = {row["relation_id"]: row["cluster"] for row in _jsonl(folder / "gold.jsonl")}
    records = _jsonl(folder / "relations.jsonl")
    return Labelled("synthetic:held-out-kinds", records, gold, {}, [], _hard_negatives(folder))


def all_sets(dev: Path = DEV) -> list[Labelled]:
    return [load_dev(d, dev) for d in DOMAINS] + [load_real(s) for s in SOURCES]


@dataclass
class PairCounts:
    true_positive: int = 0
    false_positive: int = 0
    false_negative: int = 0
    wrong: list[tuple[str, str]] = field(default_factory=list)  # merged, different facts
    hard_negative_merges: list[tuple[str, str]] = field(default_factory=list)

    @property
    def precision(self) -> float:
        predicted = self.true_positive + self.false_positive
        return self.true_positive / predicted if predicted else 1.0

    @property
    def recall(self) -> float:
        actual = self.true_positive + self.false_negative
        return self.true_positive / actual if actual else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def pair_counts(data: Labelled, mapping: dict[str, str]) -> PairCounts:
    """Pairwise counts of a run's input → output id mapping against the labels."""
    counts = PairCounts()
    for ids in data.blocks():
        for a, b in combinations(ids, 2):
            if frozenset((a, b)) in data.doubtful:
                continue
            same = data.gold[a] == data.gold[b]
            merged = mapping[a] == mapping[b]
            if same and merged:
                counts.true_positive += 1
            elif merged:
                counts.false_positive += 1
                counts.wrong.append((a, b))
                if frozenset((data.gold[a], data.gold[b])) in data.hard_negatives:
                    counts.hard_negative_merges.append((data.gold[a], data.gold[b]))
            elif same:
                counts.false_negative += 1
    counts.hard_negative_merges = sorted(set(counts.hard_negative_merges))
    return counts
