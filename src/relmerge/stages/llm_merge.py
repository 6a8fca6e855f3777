"""Ask the LLM to merge one batch (task ``relation_merge``), with validated retries."""

from __future__ import annotations

from collections.abc import Sequence

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.retry import GroupFailed, ask_validated
from relmerge.prompts import merge_relations
from relmerge.providers.base import LanguageModel, LLMResult
from relmerge.units import Unit

__all__ = ["GroupFailed", "ask_merge"]


async def ask_merge(
    llm: LanguageModel, batch: Sequence[Unit], config: DeduplicateRelationsConfig
) -> tuple[list[merge_relations.MergePart], LLMResult]:
    relations = [unit.relation for unit in batch]
    return await ask_validated(
        llm,
        lambda feedback: merge_relations.build_request(
            relations,
            temperature=config.temperature,
            description_chars=config.prompt_description_chars,
            feedback=feedback,
            max_answer_tokens=config.max_answer_tokens,
        ),
        lambda parsed: merge_relations.validate_answer(parsed, relations),
        config.max_attempts,
    )
