"""Prompts, one module per task, each with a ``TASK`` name and a ``VERSION``."""

from relmerge.prompts import merge_relations

PROMPTS = {merge_relations.TASK: merge_relations}

__all__ = ["PROMPTS", "merge_relations"]
