"""Ask the LLM to merge one batch (task ``relation_merge``), with validated retries.

Each retry tells the model what was invalid about its previous answer. A provider error
that retrying cannot fix (bad key, unknown model) is raised and stops the run; transient
ones count as a failed attempt.
"""

from __future__ import annotations

from collections.abc import Sequence

from relmerge.config import DeduplicateRelationsConfig
from relmerge.errors import InvalidAnswerError, ProviderError
from relmerge.prompts import merge_relations
from relmerge.providers.base import LanguageModel, LLMResult
from relmerge.stages.units import Unit


class GroupFailed(Exception):
    """Every attempt on a batch was invalid; ``reason`` is the last problem seen."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


async def ask_merge(
    llm: LanguageModel, batch: Sequence[Unit], config: DeduplicateRelationsConfig
) -> tuple[list[merge_relations.MergePart], LLMResult]:
    relations = [unit.relation for unit in batch]
    feedback: list[tuple[str, str]] = []
    reason = "no attempt was made"
    for _ in range(config.max_attempts):
        request = merge_relations.build_request(
            relations,
            temperature=config.temperature,
            description_chars=config.prompt_description_chars,
            feedback=feedback,
        )
        try:
            result = await llm.invoke(request)
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
            return merge_relations.validate_answer(result.parsed, relations), result
        except InvalidAnswerError as error:
            reason = str(error)
            feedback.append((result.text[:4000], reason))
    raise GroupFailed(reason)
