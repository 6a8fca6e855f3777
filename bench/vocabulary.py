"""The vocabulary held out: the lexicon without every entry a text set uses.

``held_out_lexicon(texts)`` removes from the shipped lexicon every entry (term or pattern,
any key: kinds, roles, function words, guards, symmetry) that occurs in ``texts`` — the
relation names and descriptions of a held-out dev domain — so that a measure of that
domain owes nothing to words written with it in view. ``using_lexicon`` makes every run
in its scope (the step, the judge) decide with such a lexicon.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from unittest import mock

from relmerge.decide import lexicon as lexicon_module
from relmerge.decide.lexicon import (
    Lexicon,
    build_lexicon,
    entry_pattern,
    shipped_vocabulary,
    vocabulary_entries,
    vocabulary_without,
)
from relmerge.normalize import normalize_key_text


def held_out_lexicon(texts: Iterable[str]) -> tuple[Lexicon, list[tuple[str, str]]]:
    """The shipped lexicon without the entries occurring in ``texts``, and those entries."""
    normalised = [normalize_key_text(text) for text in texts]
    removed: dict[tuple[str, str], bool] = {}

    def occurs(key: str, entry: str) -> bool:
        if (key, entry) not in removed:
            pattern = entry_pattern(key, entry)
            removed[key, entry] = any(pattern.search(text) for text in normalised)
        return removed[key, entry]

    files = shipped_vocabulary()
    for data in files:  # every entry once, so that `removed` lists them all
        for key, entry in vocabulary_entries(data):
            occurs(key, entry)
    kept = [vocabulary_without(data, occurs) for data in files]
    return build_lexicon(kept), sorted(entry for entry, hit in removed.items() if hit)


@contextmanager
def using_lexicon(lexicon: Lexicon) -> Iterator[None]:
    """Every ``lexicon_for`` call in scope (the step's, the judge's) gets ``lexicon``."""
    with mock.patch.object(lexicon_module, "load_lexicon", lambda: lexicon):
        yield
