"""The vocabulary holds general words of each language, never words of one data set."""

from __future__ import annotations

import json
import re
import tomllib
from functools import cache
from pathlib import Path

import pytest

import relmerge
from relmerge.decide.lexicon import (
    PATTERN_KEYS,
    entry_pattern,
    shipped_vocabulary,
    vocabulary_entries,
)
from relmerge.normalize import normalize_key_text
from tests.support.dev_cli import DEV

SOURCE = Path(relmerge.__file__).parent
GENERAL_WORDS = Path(__file__).with_name("general_words.toml")
LANGUAGES = ("en", "fr", "zh")
_CJK = re.compile(r"[\u3400-\u9fff]")
pytestmark = pytest.mark.skipif(not DEV.is_dir(), reason="needs ../shared/data/dev")


def _dev_words() -> tuple[set[str], set[str]]:
    names: set[str] = set()
    for line in (DEV / "entities.jsonl").read_text(encoding="utf-8").splitlines():
        names.add(json.loads(line)["name"].strip())
    sentences: set[str] = set()
    for line in (DEV / "relations.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        names |= {record["source_entity_name"].strip(), record["target_entity_name"].strip()}
        sentences.add(record["description"].strip())
    return {n for n in names if len(n) >= 2}, {s for s in sentences if len(s) >= 16}


def _mentions(name: str, text: str) -> bool:
    if re.search(r"[A-Za-z]", name):  # a Latin-script name, as a whole word
        return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE) is not None
    return name in text


@pytest.mark.parametrize(
    "path",
    [*sorted(SOURCE.rglob("*.py")), *sorted((SOURCE / "data").rglob("*.toml"))],
    ids=lambda p: str(p.relative_to(SOURCE)),
)
def test_no_dev_set_entity_or_sentence_in_code_or_vocabulary(path: Path) -> None:
    names, sentences = _dev_words()
    text = path.read_text(encoding="utf-8")
    assert [n for n in sorted(names) if _mentions(n, text)] == []
    assert [s for s in sorted(sentences) if s in text] == []


@cache
def _dev_texts() -> tuple[str, ...]:
    """Every dev relation name and description, normalised as the kernel reads them."""
    texts = []
    for line in (DEV / "relations.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        texts += [normalize_key_text(record["name"]), normalize_key_text(record["description"])]
    return tuple(texts)


def _in_dev_text(lang: str) -> set[str]:
    """The language file's terms of ≥ 3 characters (CJK: ≥ 2) found in a dev relation name
    or description, matched as the kernel matches them (patterns are classes of
    inflections, reviewed by hand, and not counted)."""
    data = dict(zip(LANGUAGES, shipped_vocabulary(), strict=True))[lang]
    found = set()
    for key, entry in vocabulary_entries(data):
        term = normalize_key_text(entry)
        if key.split(".")[0] in PATTERN_KEYS or len(term) < (2 if _CJK.search(term) else 3):
            continue
        pattern = entry_pattern(key, entry)
        if any(pattern.search(text) for text in _dev_texts()):
            found.add(term)
    return found


def _general_words(lang: str) -> dict[str, str]:
    """Allow-list entry → the reason it stays."""
    table = tomllib.loads(GENERAL_WORDS.read_text(encoding="utf-8"))[lang]
    return {normalize_key_text(e): reason for reason, entries in table.items() for e in entries}


def test_the_language_files_are_the_ones_checked() -> None:
    shipped = sorted(p.stem for p in (SOURCE / "data" / "lexicon").glob("*.toml"))
    assert shipped == sorted(LANGUAGES)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_lexicon_entry_in_dev_text_is_a_reviewed_general_word(lang: str) -> None:
    """A new entry that the dev set uses fails here until it is reviewed as a general word
    of its language and listed in general_words.toml with its reason."""
    assert sorted(_in_dev_text(lang) - set(_general_words(lang))) == []


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_allow_list_names_only_entries_that_need_it(lang: str) -> None:
    assert sorted(set(_general_words(lang)) - _in_dev_text(lang)) == []


@pytest.mark.parametrize(
    "phrase",
    [
        "骑士团的骑士",
        "隔海相望",
        "knight of the",
        "sworn allegiance to",
        "compagne de route",
        "a pour subdivision",
        "has subdivision",
        "has district",
        "travelling companion",
        "provincial capital",
        "rival claimant",
    ],
)
def test_dev_phrases_are_out_of_the_lexicon(phrase: str) -> None:
    entries = {
        normalize_key_text(entry)
        for data in shipped_vocabulary()
        for _, entry in vocabulary_entries(data)
    }
    assert phrase not in entries
