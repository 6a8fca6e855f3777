"""Prompts that a server's prefix cache can reuse: the instructions come first and are the
same bytes in every request of a task, and nothing of a request's own (entity names,
profiles, records) comes before them; a block's profiles are sent once per request."""

from __future__ import annotations

import orjson
import pytest

from relmerge.model import EntityContext, ExtractedRelation
from relmerge.prompts import cluster_relations, judge_pair, merge_relations
from relmerge.prompts.context import directed_record
from relmerge.providers.base import LLMRequest
from tests.factories import record


def _relation(relation_id: str, source: str, target: str, text: str) -> ExtractedRelation:
    fields = {
        "source_entity_id": f"e_{source}",
        "target_entity_id": f"e_{target}",
        "source_entity_name": source,
        "target_entity_name": target,
        "description": text,
    }
    return ExtractedRelation.model_validate(record(relation_id, **fields))


def _wire(request: LLMRequest) -> str:
    """The messages as a server's chat template lays them out, in order."""
    return "".join(f"<{m.role}>{m.content}</{m.role}>" for m in request.messages)


def _common_prefix(first: str, second: str) -> str:
    pairs = enumerate(zip(first, second, strict=False))
    size = next((i for i, (a, b) in pairs if a != b), min(len(first), len(second)))
    return first[:size]


def _entities(a: str, b: str) -> tuple[EntityContext, EntityContext]:
    return (
        EntityContext(f"e_{a}", a, profile=f"{a}'s profile, a long one."),
        EntityContext(f"e_{b}", b, profile=f"{b}'s profile."),
    )


def _requests(task: str) -> tuple[LLMRequest, LLMRequest, str]:
    """Two requests of ``task`` about different entities and records, and its
    instructions."""
    first = [_relation(f"r{i}", "Alice", "Bob", f"fact {i}") for i in range(3)]
    second = [_relation(f"s{i}", "Chen Wei", "Acme", f"other {i}") for i in range(4)]
    if task == merge_relations.TASK:
        build = merge_relations.build_request
        one, two = (build(rs, temperature=0.0, description_chars=500) for rs in (first, second))
        return one, two, merge_relations.SYSTEM_PROMPT
    shown = [
        [directed_record(r, (r.source_entity_id, r.target_entity_id), 500) for r in rs]
        for rs in (first, second)
    ]
    if task == judge_pair.TASK:
        one = judge_pair.build_request(
            shown[0][:1], shown[0][1], _entities("Alice", "Bob"), temperature=0.0
        )
        two = judge_pair.build_request(
            shown[1][:1], shown[1][1], _entities("Chen Wei", "Acme"), temperature=0.0
        )
        return one, two, judge_pair.SYSTEM_PROMPT
    one = cluster_relations.build_request(shown[0], _entities("Alice", "Bob"), temperature=0.0)
    two = cluster_relations.build_request(shown[1], _entities("Chen Wei", "Acme"), temperature=0.0)
    return one, two, cluster_relations.SYSTEM_PROMPT


TASKS = (merge_relations.TASK, cluster_relations.TASK, judge_pair.TASK)


@pytest.mark.parametrize("task", TASKS)
def test_the_common_prefix_of_two_requests_is_the_whole_instructions(task: str) -> None:
    one, two, instructions = _requests(task)
    first, second = _wire(one), _wire(two)
    common = _common_prefix(first, second)
    head = f"<system>{instructions}</system>"
    assert first.startswith(head) and second.startswith(head)
    assert common.startswith(head)
    # What follows the shared part is the request's own: nothing of it came earlier.
    for name in ("Alice", "Bob", "Chen Wei", "Acme", "fact 0", "other 0"):
        assert name not in common


@pytest.mark.parametrize("task", (cluster_relations.TASK, judge_pair.TASK))
def test_a_blocks_profiles_are_sent_once_per_request(task: str) -> None:
    one, _, _ = _requests(task)
    text = _wire(one)
    assert text.count("Alice's profile, a long one.") == 1
    assert text.count("Bob's profile.") == 1


def test_records_stay_the_first_json_block() -> None:
    """The wire contract readers rely on (the gold judge, test servers): the first ```json
    block of the user message holds the records."""
    one, _, _ = _requests(cluster_relations.TASK)
    user = one.messages[1].content
    block = user.split("```json\n", 1)[1].split("\n```", 1)[0]
    assert [item["relation_id"] for item in orjson.loads(block)] == ["r0", "r1", "r2"]
