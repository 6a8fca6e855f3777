from __future__ import annotations

import pytest

from relmerge.eval.metrics import evaluate


def test_perfect_prediction() -> None:
    gold = {"a": "x", "b": "x", "c": "y"}
    report = evaluate({"a": "1", "b": "1", "c": "2"}, gold)
    assert report.pair_f1 == 1.0 and report.bcubed_f1 == 1.0 and report.coverage == 1.0


def test_hand_computed_example() -> None:
    gold = {"a": "x", "b": "x", "c": "x", "d": "y"}
    predicted = {"a": "1", "b": "1", "c": "2", "d": "2"}
    report = evaluate(predicted, gold)
    # Pairs: gold {ab, ac, bc}; predicted {ab, cd}; true {ab}.
    assert report.pair_precision == pytest.approx(0.5)
    assert report.pair_recall == pytest.approx(1 / 3)
    # B-cubed precision: a 1, b 1, c 1/2, d 1/2 -> 0.75; recall: a 2/3, b 2/3, c 1/3, d 1.
    assert report.bcubed_precision == pytest.approx(0.75)
    assert report.bcubed_recall == pytest.approx((2 / 3 + 2 / 3 + 1 / 3 + 1) / 4)
    assert (report.gold_clusters, report.predicted_clusters) == (2, 2)


def test_missing_ids_are_singletons_and_lower_coverage() -> None:
    report = evaluate({"a": "1"}, {"a": "x", "b": "x"})
    assert report.coverage == 0.5
    assert report.pair_recall == 0.0
