"""The incremental judge for apps with a live graph (seed 000): ``RelationJudge``.

``checks`` holds what a check is made of, ``judge`` the judge, ``batch`` its many-at-once
form; every pair decision is the kernel's (``relmerge.decide``).
"""

from relmerge.judge.checks import JudgeContext, PendingCheck, RelationLike, Verdict
from relmerge.judge.judge import RelationJudge
from relmerge.judge.outcome import LLMOutcome

__all__ = ["JudgeContext", "LLMOutcome", "PendingCheck", "RelationJudge", "RelationLike", "Verdict"]
