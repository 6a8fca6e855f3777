"""``relmerge run --dry-run`` says, before anything is spent, what a run would struggle
with: a huge number of candidate pairs (the largest blocks, what a run would do with them,
what to do) and the records it would reject."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from relmerge.data import sample_dir
from tests.factories import record
from tests.support.cli_process import relmerge

SAMPLE = sample_dir() / "relations.jsonl"
GENERIC = 800  # records between two generic nodes: 319,600 pairs


def _batch(path: Path, generic: int = GENERIC, last: bytes = b"") -> Path:
    """A block between two generic nodes, then ordinary blocks of three records."""
    items: list[dict[str, Any]] = [
        record(
            f"g{n}",
            source_entity_id="e_company",
            source_entity_name="the company",
            target_entity_id="e_government",
            target_entity_name="the government",
            description=f"The company and the government, fact {n}.",
        )
        for n in range(generic)
    ]
    for block in range(30):
        items += [
            record(f"b{block}_{n}", target_entity_id=f"e_{block}", description=f"Fact {n}.")
            for n in range(3)
        ]
    path.write_bytes(b"".join(orjson.dumps(item) + b"\n" for item in items) + last)
    return path


def _dry_run(source: Path, tmp_path: Path, *extra: str | Path) -> list[str]:
    done = relmerge("run", source, "-o", tmp_path / "out", "--dry-run", *extra)
    assert done.returncode == 0, done.stderr
    assert "candidate pairs" in done.stdout  # the table is printed as before
    assert not (tmp_path / "out").exists()
    return done.stderr.splitlines()


def test_a_huge_block_is_named_with_what_a_run_would_do_and_what_to_do(tmp_path: Path) -> None:
    source = _batch(tmp_path / "relations.jsonl")
    lines = _dry_run(
        source, tmp_path, "--llm-base-url", "http://127.0.0.1:9/v1", "--llm-model", "m"
    )
    pairs = GENERIC * (GENERIC - 1) // 2 + 30 * 3
    assert lines[:4] == [
        f"warning: {pairs:,} candidate pairs; the 5 largest blocks (endpoint pair: records, "
        "pairs):",
        "  the company (e_company) — the government (e_government): 800 records, 319,600 pairs",
        "  Norrbeck Systems (e_norrbeck) — Ada Lind (e_0): 3 records, 3 pairs",
        "  Norrbeck Systems (e_norrbeck) — Ada Lind (e_1): 3 records, 3 pairs",
    ]
    assert len(lines) == 9
    assert lines[6].startswith("A real run scores every pair of a block at once")
    assert "about 1.3 GB of memory for the largest block" in lines[6]
    assert lines[7] == (
        "The LLM then sees a block in requests of at most 100 records (semantic_batch_size), "
        "4 a round (semantic_batch_count), 10 rounds (max_rounds): at most 40 requests a "
        "block, which put at most 198,000 of its pairs before it (1 block is larger than "
        "100 records: up to 40 requests, retries aside); the pairs left undecided stay apart "
        "and are written for review (clarifications.jsonl)."
    )
    assert lines[8].startswith("What to do: a block this large is usually one generic")
    assert "--entity-mapping" in lines[8] and "--no-semantic" in lines[8]


def test_without_an_llm_the_undecided_pairs_go_to_review(tmp_path: Path) -> None:
    lines = _dry_run(_batch(tmp_path / "relations.jsonl"), tmp_path)
    assert lines[7] == (
        "With no LLM (--llm none), every pair the rules leave undecided stays apart and is "
        "written for review (clarifications.jsonl)."
    )


def test_no_warning_without_a_huge_block_or_without_the_semantic_stage(tmp_path: Path) -> None:
    assert _dry_run(SAMPLE, tmp_path) == []
    assert _dry_run(_batch(tmp_path / "small.jsonl", generic=600), tmp_path) == []  # 179,700
    assert _dry_run(_batch(tmp_path / "relations.jsonl"), tmp_path, "--no-semantic") == []


def test_records_a_run_would_reject_are_named(tmp_path: Path) -> None:
    source = _batch(tmp_path / "relations.jsonl", generic=2, last=b'{"relation_id": "cut')
    lines = _dry_run(source, tmp_path)
    assert lines[0] == (
        "warning: 1 input record rejected, a run would set them aside in "
        f"{tmp_path / 'out' / 'rejected.jsonl'}:"
    )
    assert lines[1].startswith("  relations.jsonl:93: malformed JSON")
    assert lines[1].endswith("cut off mid-write?)")
