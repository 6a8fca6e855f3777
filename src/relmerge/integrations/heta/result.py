"""The step's result artifact as heta-framework reads it: its own result's fields, and
``issues`` as heta-framework ``StepIssue``\\ s, which the builder collects into the build
report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from heta_framework.kb.steps import IssueResolution, IssueSubject, StepIssue

from relmerge.io.records import Rejected
from relmerge.model import STEP_NAME
from relmerge.model import StepIssue as CoreIssue
from relmerge.run.result import RunOutput


@dataclass(frozen=True)
class DeduplicateRelationsResult:
    """The fields of heta-framework's ``DeduplicateRelationsResult``, then relmerge's:
    ``rejected_count``, ``fingerprint`` (of the run, which names its logs' prefix),
    ``log_keys`` and ``details`` (relmerge's whole result: LLM requests and tokens, seconds
    per stage, decisions by tier, the configuration, …)."""

    relation_keys: tuple[str, ...]
    input_relation_count: int
    output_relation_count: int
    exact_merge_count: int
    semantic_merge_count: int
    failed_group_count: int
    exact_round_count: int
    semantic_round_count: int
    issues: tuple[StepIssue, ...]
    rejected_count: int = 0
    fingerprint: str = ""
    log_keys: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_output(cls, output: RunOutput, rejected_log: str | None) -> DeduplicateRelationsResult:
        result = output.summary
        issues = [heta_issue(issue) for issue in output.issues]
        issues += [rejected_issue(item, rejected_log) for item in output.rejected]
        return cls(
            relation_keys=tuple(output.relation_keys),
            input_relation_count=result.input_relation_count,
            output_relation_count=result.output_relation_count,
            exact_merge_count=result.exact_merge_count,
            semantic_merge_count=result.semantic_merge_count,
            failed_group_count=result.failed_group_count,
            exact_round_count=result.exact_round_count,
            semantic_round_count=result.semantic_round_count,
            issues=tuple(issues),
            rejected_count=result.rejected_count,
            fingerprint=result.fingerprint or "",
            log_keys=tuple(output.log_keys),
            details=result.to_dict(),
        )


def _text(value: str, fallback: str) -> str:
    """heta-framework refuses empty text in an issue."""
    return value if value.strip() else fallback


def heta_issue(issue: CoreIssue) -> StepIssue:
    resolution = issue.resolution
    return StepIssue(
        step=_text(issue.step, STEP_NAME),
        subject=IssueSubject(
            type=_text(issue.subject.type, "relation"), id=_text(issue.subject.id, "(none)")
        ),
        message=_text(issue.message, issue.code),
        code=_text(issue.code, "issue"),
        severity=issue.severity,
        resolution=IssueResolution(
            action=_text(resolution.action, "none"), outcome=_text(resolution.outcome, "none")
        )
        if resolution is not None
        else None,
    )


def rejected_issue(rejected: Rejected, rejected_log: str | None) -> StepIssue:
    """A record set aside, in the build report too: where it came from and why."""
    where = f"; it is listed in {rejected_log} with its reason" if rejected_log else ""
    return StepIssue(
        step=STEP_NAME,
        subject=IssueSubject(type="relation_record", id=_text(rejected.origin, "(unnamed)")),
        message=_text(rejected.reason, "unreadable record"),
        code="relation_rejected",
        severity="warning",
        resolution=IssueResolution(
            action="set_aside", outcome=f"The record was left out of the output{where}."
        ),
    )


def rejected_log_key(log_keys: Sequence[str], name: str | None) -> str | None:
    """The store key of the rejected records' log, if it was written."""
    if name is None:
        return None
    return next((key for key in log_keys if key == name or key.endswith(f"/{name}")), None)
