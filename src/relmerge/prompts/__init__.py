"""Prompts, one module per task, each with a ``TASK`` name and a ``VERSION``.

:data:`PROMPTS` finds a task's module by its name; ``PROMPT`` of each module names it with
its version (``relation_cluster@2``): every request carries it (``LLMRequest.prompt``,
part of the cache key) and every decision an LLM made records it (``Decision.prompt``).
Bump a ``VERSION`` when a prompt's meaning changes.
"""

from __future__ import annotations

from typing import Protocol

from relmerge.prompts import cluster_many, cluster_relations, judge_pair, merge_relations


class PromptModule(Protocol):
    """What every prompt module has (and ``build_request`` / ``validate_answer``, whose
    arguments are the task's own)."""

    TASK: str
    VERSION: int
    PROMPT: str


PROMPTS: dict[str, PromptModule] = {
    module.TASK: module for module in (merge_relations, cluster_relations, cluster_many, judge_pair)
}

__all__ = [
    "PROMPTS",
    "PromptModule",
    "cluster_many",
    "cluster_relations",
    "judge_pair",
    "merge_relations",
]
