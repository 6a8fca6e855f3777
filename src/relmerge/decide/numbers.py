"""Quantities, dates and periods mentioned in a relation, as a set of numbers.

"20 %", "２０％", "百分之二十" and "twenty" are the same number, so that a guard can tell
"another quantity" (a 20% vs a 35% stake, CEO 1998-2009 vs 2017-) from "the same quantity
written differently".
"""

from __future__ import annotations

import re
from functools import cache

from relmerge.decide.lexicon import Lexicon

_ARABIC = re.compile(r"\d{1,3}(?:[ ,\u00a0\u202f]\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")
_CN_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_CN_UNITS = {"十": 10, "百": 100, "千": 1000}
_CN_BIG = {"万": 10_000, "亿": 100_000_000}
_CN_RUN = re.compile(r"[零〇一二两三四五六七八九十百千万亿]+")
_PERIOD_WORDS = (
    r"book|part|volume|chapter|act|season|episode|tome|livre|partie|chapitre|acte|saison"
)


def _chinese_to_int(text: str) -> int | None:
    """Parse a run of Chinese numerals: 五百 → 500, 十四 → 14, 二〇一七 → 2017."""
    if not any(ch in _CN_UNITS or ch in _CN_BIG for ch in text):
        if len(text) == 1 and text in ("十",):
            return 10
        digits = [_CN_DIGITS.get(ch) for ch in text]
        if any(d is None for d in digits):
            return None
        return int("".join(str(d) for d in digits)) if len(digits) > 1 else digits[0]
    total, section, current = 0, 0, 0
    for ch in text:
        if ch in _CN_DIGITS:
            current = _CN_DIGITS[ch]
        elif ch in _CN_UNITS:
            section += (current or 1) * _CN_UNITS[ch]
            current = 0
        elif ch in _CN_BIG:
            total += (section + current) * _CN_BIG[ch]
            section, current = 0, 0
    return total + section + current


@cache
def _ordinal_patterns(words: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Compiled once per vocabulary: this runs for every relation of a batch."""
    alternatives = "|".join(re.escape(word) for word in sorted(words, key=len, reverse=True))
    return (
        re.compile(rf"\b(?:{_PERIOD_WORDS})\s+({alternatives})\b"),
        re.compile(rf"\b({alternatives})\s+(?:{_PERIOD_WORDS})\b"),
    )


def _word_numbers(text: str, lexicon: Lexicon) -> set[float]:
    """Spelled-out ordinals in period phrases: "book two", "second book", "tome deux"."""
    if not lexicon.ordinals:
        return set()
    found: set[float] = set()
    for pattern in _ordinal_patterns(tuple(lexicon.ordinals)):
        found.update(float(lexicon.ordinals[m.group(1)]) for m in pattern.finditer(text))
    return found


def extract_numbers(text: str, lexicon: Lexicon) -> frozenset[float]:
    """Every number in ``text`` (already NFKC + case-folded)."""
    found: set[float] = set()
    for match in _ARABIC.finditer(text):
        raw = re.sub(r"[ ,\u00a0\u202f]", "", match.group())
        try:
            found.add(float(raw))
        except ValueError:
            continue
    for match in _CN_RUN.finditer(text.replace("百分之", "")):
        value = _chinese_to_int(match.group())
        if value is not None:
            found.add(float(value))
    found |= _word_numbers(text, lexicon)
    return frozenset(found)


def without_numbers(text: str) -> str:
    """``text`` with its numbers (Arabic, Chinese, 百分之) blanked out."""
    return _CN_RUN.sub(" ", _ARABIC.sub(" ", text.replace("百分之", " ")))


def numbers_conflict(left: frozenset[float], right: frozenset[float]) -> bool:
    """Two mentions name other quantities when each has a number the other lacks.

    One side without numbers, or one side's numbers all in the other's, is compatible: a
    timed and an untimed mention of one fact, or a detail added ("20% stake" / "a 20%
    stake bought in 2011") — unless both name years and the years differ.
    """
    if not left or not right:
        return False
    if not (left <= right or right <= left):
        return True
    # Periods: both dated, with other years ("since 2001" / "1988-2001") are two periods.
    years_left, years_right = _years(left), _years(right)
    return bool(years_left and years_right and years_left != years_right)


def _years(numbers: frozenset[float]) -> frozenset[float]:
    return frozenset(n for n in numbers if n.is_integer() and 1000 <= n <= 2100)
