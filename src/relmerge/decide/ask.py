"""Validated asks: ``relation_cluster`` for many records, ``relation_judge`` for a
candidate against existing ones. Retries tell the model what was invalid (``retry``); a
question that never gets a valid answer raises ``GroupFailed`` for its caller to record.
``attempts`` (default: ``max_attempts`` for this ask alone) lets a caller share one
batch's requests among several asks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.retry import Attempts, ask_validated
from relmerge.model import EntityContext
from relmerge.prompts import cluster_relations, judge_pair
from relmerge.providers.base import LanguageModel, LLMResult


async def ask_cluster(
    llm: LanguageModel,
    records: Sequence[dict[str, Any]],
    entities: tuple[EntityContext, EntityContext],
    config: DeduplicateRelationsConfig,
    attempts: Attempts | None = None,
    canary: Mapping[int, int | None] | None = None,
) -> tuple[cluster_relations.ClusterOutcome, LLMResult]:
    """``canary``: positions of canary records among ``records`` (see ``validate_answer``)."""
    return await ask_validated(
        llm,
        lambda feedback: cluster_relations.build_request(
            records,
            entities,
            temperature=config.temperature,
            feedback=feedback,
            max_answer_tokens=config.max_answer_tokens,
        ),
        lambda parsed: cluster_relations.validate_answer(parsed, records, canary or {}),
        attempts if attempts is not None else Attempts(config.max_attempts),
    )


async def ask_judge(
    llm: LanguageModel,
    existing: Sequence[dict[str, Any]],
    candidate: dict[str, Any],
    entities: tuple[EntityContext, EntityContext],
    config: DeduplicateRelationsConfig,
    attempts: Attempts | None = None,
) -> tuple[judge_pair.JudgeOutcome, LLMResult]:
    existing_ids = [str(record["relation_id"]) for record in existing]
    return await ask_validated(
        llm,
        lambda feedback: judge_pair.build_request(
            existing,
            candidate,
            entities,
            temperature=config.temperature,
            feedback=feedback,
            max_answer_tokens=config.max_answer_tokens,
        ),
        lambda parsed: judge_pair.validate_answer(parsed, existing_ids),
        attempts if attempts is not None else Attempts(config.max_attempts),
    )
