"""The typed figures of one run, as the report shows them.

Every value read from OUT is untrusted JSON: these types hold it already checked, so the
plots and the page never guess at shapes (and only :mod:`relmerge.report.html` turns text
into markup, escaped).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from relmerge.report.words import VERDICTS

SCORE_NAMES = ("fuzzy", "cosine")
# The band thresholds drawn on the score plots, with the score each belongs to.
THRESHOLDS = {
    "auto_keep_fuzzy": "fuzzy",
    "auto_merge_fuzzy": "fuzzy",
    "auto_keep_cosine": "cosine",
    "auto_merge_cosine": "cosine",
    "similarity_threshold": "cosine",
}
# A keep-apart band at its score's floor keeps nothing apart ("cosine below -1"): it is
# how the config turns such a band off, as None turns off a merge band.
_KEEP_FLOORS = {
    "auto_keep_fuzzy": 0.0,
    "auto_keep_cosine": -1.0,
    "auto_keep_description_cosine": -1.0,
}


def band_on(name: str, value: float | None) -> bool:
    """Whether the band threshold ``name`` at ``value`` can decide any pair."""
    if value is None:
        return False
    floor = _KEEP_FLOORS.get(name)
    return floor is None or value > floor


# How a decision ended, for colours and legends; a policy decision is one nobody made.
_ENDINGS = ("merge", "split", "partial_merge", "keep_both", "failed")
OUTCOMES = {
    **{verdict: VERDICTS[verdict].label for verdict in _ENDINGS},
    "policy": "undecided: unsure policy applied",
    "other": "other verdict",
    "any": "decisions",  # only counts by tier are known (no decision log)
}


def outcome_of(tier: str, verdict: str) -> str:
    if tier == "policy":
        return "policy"
    return verdict if verdict in (*_ENDINGS, "any") else "other"


def as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def as_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def as_text(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


@dataclass(frozen=True)
class RunSummary:
    """The header figures, from ``deduplicate_relations_result.json``."""

    input_records: int
    rejected: int
    input_relations: int
    output_relations: int
    exact_merges: int
    semantic_merges: int
    failed_groups: int
    exact_rounds: int
    semantic_rounds: int
    clarifications: int
    llm_model: str
    embedding_model: str
    fingerprint: str

    @classmethod
    def from_result(cls, result: dict[str, Any]) -> RunSummary:
        count = {key: as_int(result.get(key)) for key in result}
        return cls(
            input_records=count.get("input_record_count", 0),
            rejected=count.get("rejected_count", 0),
            input_relations=count.get("input_relation_count", 0),
            output_relations=count.get("output_relation_count", 0),
            exact_merges=count.get("exact_merge_count", 0),
            semantic_merges=count.get("semantic_merge_count", 0),
            failed_groups=count.get("failed_group_count", 0),
            exact_rounds=count.get("exact_round_count", 0),
            semantic_rounds=count.get("semantic_round_count", 0),
            clarifications=count.get("clarification_count", 0),
            llm_model=as_text(result.get("llm_model"), "?"),
            embedding_model=as_text(result.get("embedding_model"), "?"),
            fingerprint=as_text(result.get("fingerprint")),
        )


@dataclass(frozen=True)
class LLMUsage:
    requests: int
    cache_hits: int
    failed: int
    invalid: int
    prompt_tokens: int
    completion_tokens: int
    # The result's "cost" object (absent from results of older runs: empty).
    cost: dict[str, Any] = field(default_factory=dict)
    # The result's "canaries" object (absent from results of older runs: empty).
    canaries: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_result(cls, result: dict[str, Any]) -> LLMUsage:
        tokens = result.get("tokens")
        tokens = tokens if isinstance(tokens, dict) else {}
        cost = result.get("cost")
        canaries = result.get("canaries")
        return cls(
            requests=as_int(result.get("llm_requests")),
            cache_hits=as_int(result.get("llm_cache_hits")),
            failed=as_int(result.get("llm_failed_requests")),
            invalid=as_int(result.get("llm_invalid_answers")),
            prompt_tokens=as_int(tokens.get("prompt")),
            completion_tokens=as_int(tokens.get("completion")),
            cost=cost if isinstance(cost, dict) else {},
            canaries=canaries if isinstance(canaries, dict) else {},
        )


@dataclass(frozen=True)
class IssueCount:
    code: str
    severity: str
    count: int
    example: str


@dataclass(frozen=True)
class ScoredPair:
    """One scored semantic decision: its scores and how it ended."""

    fuzzy: float | None
    cosine: float | None
    outcome: str  # a key of OUTCOMES


@dataclass(frozen=True)
class Member:
    relation_id: str
    record: dict[str, Any] | None  # the input record, when INPUT was given and holds it


@dataclass(frozen=True)
class MergedGroup:
    output_id: str
    relation: dict[str, Any] | None  # the output relation file
    members: list[Member]
    tiers: dict[str, int]  # decisions that produced it, by tier


@dataclass(frozen=True)
class Clarification:
    id: str
    records: list[dict[str, Any]]
    scores: dict[str, float]
    reason: str
    policy_decision: str


@dataclass
class Decisions:
    """What ``decisions.jsonl`` says, aggregated while streaming."""

    by_stage_tier: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    scored: list[ScoredPair] = field(default_factory=list)
    scored_total: int = 0
    group_tiers: dict[str, dict[str, int]] = field(default_factory=dict)
    lines: int = 0


@dataclass
class ReportData:
    out: str
    summary: RunSummary
    llm: LLMUsage
    seconds: dict[str, float]
    thresholds: dict[str, float | None]
    settings: dict[str, str]
    issues: list[IssueCount]
    decisions: Decisions
    cluster_sizes: dict[int, int]
    groups: list[MergedGroup]
    group_count: int
    members_shown: bool
    pending: list[Clarification]
    pending_count: int
    answered_count: int
    rejected_count: int
    rejected_reasons: list[tuple[str, int]]
    rejected_examples: list[tuple[str, str]]
    notes: list[str] = field(default_factory=list)
