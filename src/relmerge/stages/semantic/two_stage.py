"""The full model only where a vector can change a decision; its first stage elsewhere.

The default embedder's full pass is most of a large run's CPU, yet with the shipped bands
few verdicts read a cosine (``relmerge.decide.vector_need``). So, when the embedder has a
cheap first stage (``providers.embedding.TwoStage``), the chunk's relations are split
before anything is embedded:

* **the full model** embeds the relations whose verdicts read a cosine (a rule would
  decide the pair on it, or the block's merge order could depend on it), and those the
  cross-block report may compare (``partners.report_candidates``): every decision and
  every report finding is the one a run embedding everything with the full model makes;
* **the first stage** embeds the other relations of blocks of two or more: their
  vectors only order merges that cannot conflict and show a cosine in the decision log.

A text the full model embeds for one relation is full for every relation that carries it.
The split is off in a merge into a store, with a person's earlier answers (they can add
keeps the check does not see), and with ``two_stage_embedding = false``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.features import RelationFeatures
from relmerge.decide.scores import BlockFuzzy, relation_vectors
from relmerge.decide.vector_need import VectorNeed, vector_need
from relmerge.providers.embedding import EmbeddingModel, Vectors
from relmerge.stages.semantic.blocking import BlockKey
from relmerge.stages.semantic.text import UnitVectors, embed_units, wanted_texts
from relmerge.units import Unit


@dataclass
class EmbeddedCounts:
    """Distinct texts embedded (descriptions and names), by which pass and why; and the
    pairs the first stage settled."""

    for_rules: int = 0  # the full model: a verdict reads the cosine
    for_report: int = 0  # the full model: the cross-block report may compare them
    first_stage: int = 0  # the first stage
    settled_pairs: int = 0  # pairs a rule merged on first-stage vectors

    def add(self, other: EmbeddedCounts) -> None:
        self.for_rules += other.for_rules
        self.for_report += other.for_report
        self.first_stage += other.first_stage
        self.settled_pairs += other.settled_pairs

    def as_dict(self) -> dict[str, int]:
        return {
            "full_model_for_rules": self.for_rules,
            "full_model_for_report": self.for_report,
            "first_stage": self.first_stage,
            "pairs_settled_by_first_stage": self.settled_pairs,
        }


@dataclass
class Split:
    """Per unit: whether the full model embeds it (``full``; ``for_rules``: because a
    verdict reads its vector) and whether the first stage does (``first``). ``pending``:
    blocks the first stage may settle (see :func:`settle`); ``fuzzy``: each block's fuzzy
    ratios, by its first unit, so no block is scored twice."""

    full: list[bool]
    first: list[bool]
    for_rules: list[bool]
    fuzzy: dict[int, BlockFuzzy] = field(default_factory=dict)
    pending: list[tuple[list[int], VectorNeed]] = field(default_factory=list)


def settle_threshold(config: DeduplicateRelationsConfig) -> float | None:
    """The first-stage cosine at or above which a pair the cosine band reads merges on
    first-stage vectors (never below the band itself), or None."""
    band, sure = config.auto_merge_cosine, config.first_stage_merge_cosine
    if band is None or sure is None:
        return None
    return max(band, sure)


def split_units(
    units: Sequence[Unit],
    blocks: Mapping[BlockKey, list[int]],
    features: Mapping[int, RelationFeatures],
    config: DeduplicateRelationsConfig,
    report: Sequence[bool],
) -> Split:
    """The split of ``units`` before anything is embedded (``report``: the units the
    cross-block report compares)."""
    size = len(units)
    for_rules = [False] * size
    in_multi = [False] * size
    split = Split([], [], for_rules)
    settles = settle_threshold(config) is not None
    for members in blocks.values():
        if len(members) < 2:
            continue
        for i in members:
            in_multi[i] = True
        block_features = [features[i] for i in members]
        block_fuzzy = BlockFuzzy(block_features)
        split.fuzzy[members[0]] = block_fuzzy
        relations = [units[i].relation for i in members]
        need = vector_need(relations, block_features, block_fuzzy, config)
        if not need.rows:
            continue
        if (
            settles
            and not need.ordered
            and all(mode == "full" for _, _, mode in need.pairs)
            and not any(report[i] for i in members)
        ):
            split.pending.append((members, need))  # the first stage may settle it
            continue
        for row in need.rows:
            for_rules[members[row]] = True
    split.full = [rule or seen for rule, seen in zip(for_rules, report, strict=True)]
    split.first = [multi and not whole for multi, whole in zip(in_multi, split.full, strict=True)]
    return split


def settle(
    split: Split,
    descriptions: UnitVectors,
    names: UnitVectors,
    config: DeduplicateRelationsConfig,
) -> int:
    """Decide each pending block on its first-stage vectors where every pair a rule reads
    is at or above the settle threshold: the rule merges them on these vectors as it would
    on the model's (``bench/first_stage.py`` measures that, held out). Any other pending
    block's rows go to the full model. The pairs settled."""
    threshold = settle_threshold(config)
    settled = 0
    for members, need in split.pending:
        vectors = relation_vectors(descriptions[members], names[members])
        cosines = [float(vectors[a] @ vectors[b]) for a, b, _ in need.pairs]
        if threshold is not None and min(cosines) >= threshold:
            settled += len(cosines)
            continue
        for row in need.rows:
            split.full[members[row]] = split.for_rules[members[row]] = True
    split.pending = []
    return settled


async def embed_pass(
    texts: Sequence[str],
    names: Sequence[str],
    wanted: list[bool],
    embedder: EmbeddingModel,
    on_embedded: Callable[[int], None],
) -> tuple[UnitVectors, UnitVectors]:
    """The descriptions and names of the ``wanted`` units, by ``embedder``."""
    descriptions = await embed_units(texts, embedder, wanted, on_embedded)
    # Names repeat a lot ("related", "下辖"): each distinct name is embedded once.
    return descriptions, await embed_units(names, embedder, wanted, on_embedded)


def distinct(texts: Sequence[str], names: Sequence[str], wanted: Sequence[bool]) -> int:
    """Distinct descriptions plus distinct names of the ``wanted`` units."""
    return len(wanted_texts(texts, wanted)) + len(wanted_texts(names, wanted))


def embedded_counts(
    texts: Sequence[str], names: Sequence[str], split: Split, settled: int
) -> EmbeddedCounts:
    """What the split had embedded, once it is settled."""
    rules = distinct(texts, names, split.for_rules)
    return EmbeddedCounts(
        for_rules=rules,
        for_report=distinct(texts, names, split.full) - rules,
        first_stage=distinct(texts, names, split.first),
        settled_pairs=settled,
    )


def combined(whole: UnitVectors, cheap: UnitVectors) -> UnitVectors:
    """One set of rows: each unit's full vector where it has one, else its first-stage one."""
    if not len(cheap.matrix):
        return whole
    if not len(whole.matrix):
        return cheap
    matrix: Vectors = np.concatenate([whole.matrix, cheap.matrix])
    offset = len(whole.matrix)
    rows = np.where(whole.rows >= 0, whole.rows, np.where(cheap.rows >= 0, cheap.rows + offset, -1))
    return UnitVectors(matrix, rows)
