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
from relmerge.run.store_merge import StoreMerge
from relmerge.version import __version__ as __version__

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
    "StoreMerge",
    "Verdict",
]
