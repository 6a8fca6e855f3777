"""The shipped band defaults are what ``bench/calibrate.py``'s procedure chooses."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from relmerge import DeduplicateRelationsConfig
from relmerge.providers.embedding import CachedEmbedder
from relmerge.providers.use_embed import UseEmbedder
from tests.support.dev_cli import DEV

BENCH = Path(__file__).resolve().parents[2] / "bench"
REAL = DEV.parent / "real"
pytestmark = pytest.mark.skipif(
    not (DEV.is_dir() and REAL.is_dir()), reason="needs ../shared/data/dev and /real"
)


async def test_the_defaults_are_the_calibrated_bands() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import calibrate
        from labelled import all_sets
    finally:
        sys.path.remove(str(BENCH))
    embedder = CachedEmbedder(UseEmbedder())
    pairs = [p for data in all_sets(DEV) for p in await calibrate.pair_table(data, embedder)]
    defaults = DeduplicateRelationsConfig()
    report = calibrate.calibrate(pairs, defaults.auto_keep_fuzzy)
    assert {band: entry["shipped"] for band, entry in report.items()} == {
        band: getattr(defaults, band) for band in calibrate.BANDS
    }
    # Every band that ships held on every held-out fold with no hard-negative merge.
    for entry in report.values():
        if entry["ships"]:
            assert all(f["hard_negatives"] == 0 for f in entry["folds"])
            assert all(
                f["precision"] is None or f["precision"] >= calibrate.PRECISION
                for f in entry["folds"]
            )
