"""relmerge: deduplicate the relations of LLM-extracted knowledge graphs.

>>> from relmerge import DeduplicateRelations, DeduplicateRelationsConfig
>>> step = DeduplicateRelations(DeduplicateRelationsConfig(semantic_merge=False))
>>> step.name
'deduplicate_relations'
"""

from relmerge.cache import RunCache
from relmerge.config import DeduplicateRelationsConfig
from relmerge.context import DictContext
from relmerge.errors import RelmergeError
from relmerge.judge import JudgeContext, RelationJudge, Verdict
from relmerge.model import Decision, ExtractedRelation, StepIssue
from relmerge.run.step import DeduplicateRelations

# The one place the version is written: the build reads it (pyproject [tool.hatch.version]),
# `relmerge --version` prints it.
__version__ = "0.1.0"

__all__ = [
    "Decision",
    "DeduplicateRelations",
    "DeduplicateRelationsConfig",
    "DictContext",
    "ExtractedRelation",
    "JudgeContext",
    "RelationJudge",
    "RelmergeError",
    "RunCache",
    "StepIssue",
    "Verdict",
]
