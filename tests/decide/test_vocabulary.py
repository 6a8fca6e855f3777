"""The vocabulary holds general words of each language, never words of one data set."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import relmerge
from tests.support.dev_cli import DEV

SOURCE = Path(relmerge.__file__).parent
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
