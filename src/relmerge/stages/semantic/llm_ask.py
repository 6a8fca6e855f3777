"""Ask the LLM about one block: ``relation_cluster`` for many records, ``relation_judge``
for two. Retries tell the model what was invalid; a block that never gets a valid answer
keeps what the tiers decided and is reported."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from relmerge.config import DeduplicateRelationsConfig
from relmerge.errors import InvalidAnswerError, ProviderError
from relmerge.prompts import cluster_relations, judge_pair
from relmerge.prompts.context import EntityContext
from relmerge.providers.base import LanguageModel, LLMRequest, LLMResult
from relmerge.stages.llm_merge import GroupFailed

T = TypeVar("T")


async def ask_validated(
    llm: LanguageModel,
    build: Callable[[list[tuple[str, str]]], LLMRequest],
    validate: Callable[[Any], T],
    max_attempts: int,
) -> tuple[T, LLMResult]:
    """Send, parse, validate; retry with feedback up to ``max_attempts`` times."""
    feedback: list[tuple[str, str]] = []
    reason = "no attempt was made"
    for _ in range(max_attempts):
        try:
            result = await llm.invoke(build(feedback))
        except ProviderError as error:
            if not error.retryable:
                raise
            reason = f"the model endpoint failed: {error}"
            continue
        if result.parsed is None:
            reason = "LLM output is not valid JSON."
            feedback.append((result.text[:4000], reason))
            continue
        try:
            return validate(result.parsed), result
        except InvalidAnswerError as error:
            reason = str(error)
            feedback.append((result.text[:4000], reason))
    raise GroupFailed(reason)


async def ask_cluster(
    llm: LanguageModel,
    records: Sequence[dict[str, Any]],
    entities: tuple[EntityContext, EntityContext],
    config: DeduplicateRelationsConfig,
) -> tuple[cluster_relations.ClusterOutcome, LLMResult]:
    return await ask_validated(
        llm,
        lambda feedback: cluster_relations.build_request(
            records, entities, temperature=config.temperature, feedback=feedback
        ),
        lambda parsed: cluster_relations.validate_answer(parsed, records),
        config.max_attempts,
    )


async def ask_judge(
    llm: LanguageModel,
    existing: Sequence[dict[str, Any]],
    candidate: dict[str, Any],
    entities: tuple[EntityContext, EntityContext],
    config: DeduplicateRelationsConfig,
) -> tuple[judge_pair.JudgeOutcome, LLMResult]:
    existing_ids = [str(record["relation_id"]) for record in existing]
    return await ask_validated(
        llm,
        lambda feedback: judge_pair.build_request(
            existing, candidate, entities, temperature=config.temperature, feedback=feedback
        ),
        lambda parsed: judge_pair.validate_answer(parsed, existing_ids),
        config.max_attempts,
    )
