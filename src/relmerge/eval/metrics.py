"""Pairwise and B-cubed precision/recall/F1 of predicted clusters against gold clusters.

Computed from the contingency table of (gold cluster, predicted cluster) counts, so the
cost is linear in the number of ids, not quadratic in pairs. Gold ids missing from the
predicted mapping count as singletons and lower ``coverage``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


def _pairs(n: int) -> int:
    return n * (n - 1) // 2


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


@dataclass(frozen=True)
class EvalReport:
    pair_precision: float
    pair_recall: float
    pair_f1: float
    bcubed_precision: float
    bcubed_recall: float
    bcubed_f1: float
    gold_ids: int
    gold_clusters: int
    predicted_clusters: int
    coverage: float
    true_pairs: int
    predicted_pairs: int
    gold_pairs: int

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


def evaluate(predicted: Mapping[str, str], gold: Mapping[str, str]) -> EvalReport:
    """Score ``predicted`` (input id -> output id) on the ids of ``gold`` (id -> cluster)."""
    ids = list(gold)
    covered = sum(1 for relation_id in ids if relation_id in predicted)
    pred = {i: predicted.get(i, f"\x00missing:{i}") for i in ids}
    cells = Counter((gold[i], pred[i]) for i in ids)
    gold_sizes = Counter(gold[i] for i in ids)
    pred_sizes = Counter(pred.values())

    true_pairs = sum(_pairs(n) for n in cells.values())
    predicted_pairs = sum(_pairs(n) for n in pred_sizes.values())
    gold_pairs = sum(_pairs(n) for n in gold_sizes.values())
    precision = true_pairs / predicted_pairs if predicted_pairs else 1.0
    recall = true_pairs / gold_pairs if gold_pairs else 1.0

    # B-cubed: each id's overlap between its gold and predicted cluster, averaged.
    b_precision = sum(n * n / pred_sizes[p] for (_, p), n in cells.items()) / len(ids)
    b_recall = sum(n * n / gold_sizes[g] for (g, _), n in cells.items()) / len(ids)
    return EvalReport(
        pair_precision=precision,
        pair_recall=recall,
        pair_f1=_f1(precision, recall),
        bcubed_precision=b_precision,
        bcubed_recall=b_recall,
        bcubed_f1=_f1(b_precision, b_recall),
        gold_ids=len(ids),
        gold_clusters=len(gold_sizes),
        predicted_clusters=len(pred_sizes),
        coverage=covered / len(ids) if ids else 0.0,
        true_pairs=true_pairs,
        predicted_pairs=predicted_pairs,
        gold_pairs=gold_pairs,
    )
