"""``--dry-run``'s estimate counts requests as they will be sent: packed by default
(``llm_pack_tokens``), one question a request with 0."""

from __future__ import annotations

from relmerge.config import DeduplicateRelationsConfig
from relmerge.prompts import cluster_relations
from relmerge.run.estimate import Estimate, estimate
from relmerge.run.plan import Plan

RECORD_CHARS = 400  # per record, as a prompt shows it


def planned(block_sizes: list[int]) -> Plan:
    records = sum(block_sizes)
    counts = {"input_relation_count": records}
    return Plan(counts, block_sizes=block_sizes, record_chars=records * RECORD_CHARS)


def requests(found: Estimate) -> dict[str, int]:
    return {name: task.requests for name, task in found.tasks.items()}


def test_the_default_packs_the_first_questions_of_the_blocks() -> None:
    plan = planned([2, 2, 3, 5])
    packed = estimate(plan, DeduplicateRelationsConfig())
    alone = estimate(plan, DeduplicateRelationsConfig(llm_pack_tokens=0))
    assert requests(alone) == {"relation_judge": 2, "relation_cluster": 2}
    assert requests(packed) == {"relation_cluster_many": 1}
    # The instructions are sent once instead of four times.
    instructions = len(cluster_relations.SYSTEM_PROMPT) // 4
    assert alone.prompt_tokens - packed.prompt_tokens > 2 * instructions


def test_a_blocks_later_batches_are_asked_alone() -> None:
    config = DeduplicateRelationsConfig(semantic_batch_size=4)
    found = estimate(planned([2, 10]), config)  # the 10: batches of 4, 4 and 2
    assert requests(found) == {"relation_cluster_many": 1, "relation_cluster": 2}
    assert found.tasks["relation_cluster_many"].completion_tokens == 40 * (2 + 4)


def test_packs_are_cut_at_the_record_cap_and_the_token_budget() -> None:
    capped = DeduplicateRelationsConfig(llm_pack_records=4)
    assert requests(estimate(planned([2] * 5), capped)) == {
        "relation_cluster_many": 2,  # 2 + 2 records, twice
        "relation_judge": 1,  # the fifth pair, alone in its pack
    }
    # Each pair is ~200 tokens of records and profiles: 500 tokens hold two of them.
    budget = DeduplicateRelationsConfig(llm_pack_tokens=500)
    assert requests(estimate(planned([2] * 4), budget)) == {"relation_cluster_many": 2}
    tiny = DeduplicateRelationsConfig(llm_pack_tokens=1)
    assert requests(estimate(planned([2] * 4), tiny)) == {"relation_judge": 4}
