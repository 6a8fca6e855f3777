"""Warnings on stderr about what a run set aside or would struggle with.

A rejected record is a recorded issue, not a failure (exit 0; ``--strict`` fails): but a
row in the summary table is easy to miss, and a record cut off mid-write is data the user
believes is in the graph. So the run says it on stderr too (not with ``--quiet``: a script
that asked for silence has ``--strict`` to fail instead).

A dry run that counts billions of candidate pairs says where they are (splink's "n
largest blocks"), what a real run would do with them, and what to do instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from relmerge.cli.apply_step import plural
from relmerge.config import DeduplicateRelationsConfig
from relmerge.io.records import Rejected
from relmerge.run.plan import Plan

SHOWN_REASONS = 3
_REASON_CHARS = 200


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


def rejected_warning(rejected: Sequence[Rejected], where: str) -> list[str]:
    """``warning: N input records rejected, WHERE:`` and the first reasons, one a line,
    each with its ``file:line`` (or ``file:item N``, the object key) origin."""
    if not rejected:
        return []
    count = len(rejected)
    records = "record" if count == 1 else "records"
    lines = [f"warning: {count} input {records} rejected, {where}:"]
    lines += [f"  {item.origin}: {_short(item.reason)}" for item in rejected[:SHOWN_REASONS]]
    if count > SHOWN_REASONS:
        lines.append(f"  … and {count - SHOWN_REASONS} more")
    return lines


# A real run scores every pair of a block at once (pair list, score matrices, a decision per
# pair, the undecided ones written for review): measured on a synthetic block of 2,000
# records (2.0 million pairs) with --llm none: 7.7 GB and 110 s, so roughly 4 KB and 55 µs
# a pair; a block of 500 records: 0.5 GB. Rough figures, for orders of magnitude.
BYTES_PER_PAIR = 4_000
SECONDS_PER_PAIR = 55e-6
# A dry run warns past either: one block needing about 1 GB, or about an hour of scoring.
HUGE_BLOCK_PAIRS = 250_000
HUGE_PAIRS = 65_000_000


def _size(pairs: int) -> str:
    gigabytes = pairs * BYTES_PER_PAIR / 1e9
    return f"{gigabytes:,.0f} GB" if gigabytes >= 10 else f"{gigabytes:.1f} GB"


def _duration(pairs: int) -> str:
    seconds = pairs * SECONDS_PER_PAIR
    if seconds >= 2 * 86_400:
        return f"{seconds / 86_400:,.0f} days"
    if seconds >= 7_200:
        return f"{seconds / 3_600:,.0f} hours"
    return f"{max(seconds / 60, 1):,.0f} minutes"


def huge_blocks_warning(plan: Plan, config: DeduplicateRelationsConfig, llm: bool) -> list[str]:
    """When blocking leaves a huge number of candidate pairs (``--dry-run``): the largest
    blocks (endpoint pair, records, pairs), what a real run would do with them, and what
    the user can do. Nothing when no block is that large, or the semantic stage is off."""
    pairs = plan.counts["candidate_pairs"]
    top = plan.largest[0].pairs if plan.largest else 0
    if not config.semantic_merge or (top < HUGE_BLOCK_PAIRS and pairs < HUGE_PAIRS):
        return []
    lines = [
        f"warning: {pairs:,} candidate pairs; the {len(plan.largest)} largest blocks "
        "(endpoint pair: records, pairs):"
    ]
    lines += [
        f"  {block.source_name} ({block.source_id}) — {block.target_name} ({block.target_id}): "
        f"{plural(block.records, 'record')}, {plural(block.pairs, 'pair')}"
        for block in plan.largest
    ]
    lines.append(
        f"A real run scores every pair of a block at once, at roughly {BYTES_PER_PAIR // 1000} "
        f"KB and {SECONDS_PER_PAIR * 1e6:.0f} µs a pair: about {_size(top)} of memory for the "
        f"largest block, and {_duration(pairs)} of scoring in all."
    )
    size, count, rounds = (
        config.semantic_batch_size,
        config.semantic_batch_count,
        config.max_rounds,
    )
    if llm:
        asked = count * rounds
        over = sum(1 for records in plan.block_sizes if records > size)
        blocks = "1 block is" if over == 1 else f"{over:,} blocks are"
        lines.append(
            f"The LLM then sees a block in requests of at most {plural(size, 'record')} "
            f"(semantic_batch_size), {count} a round (semantic_batch_count), "
            f"{plural(rounds, 'round')} (max_rounds): at most {plural(asked, 'request')} a "
            f"block, which put at most {asked * size * (size - 1) // 2:,} of its pairs before "
            f"it ({blocks} larger than {plural(size, 'record')}: up to "
            f"{plural(over * asked, 'request')}, retries aside); "
            "the pairs left undecided stay apart and are written for review "
            "(clarifications.jsonl)."
        )
    else:
        lines.append(
            "With no LLM (--llm none), every pair the rules leave undecided stays apart and is "
            "written for review (clarifications.jsonl)."
        )
    lines.append(
        "What to do: a block this large is usually one generic or unresolved node "
        '("the company", "it") gathering the relations of many entities: map it to the right '
        "entities with --entity-mapping (or resolve it in the entity step upstream), or run "
        "with --no-semantic (exact-key duplicates are still merged; no pair is scored)."
    )
    return lines
