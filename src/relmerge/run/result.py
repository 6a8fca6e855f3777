"""What a run produced: :class:`RunOutput`, and its figures, :class:`RunResult`.

``RunResult`` is the one typed form of ``deduplicate_relations_result.json`` (DESIGN §2:
its keys and their meanings are a contract): the pipeline builds it, the CLI reads its
summary from it and writes it, the step sets it as its artifact, the heta-framework
integration copies its fields. :meth:`RunResult.to_dict` is its one serialiser (run once
per result; ``RunOutput.result`` is that JSON object, as callers have always read it).
The report reads the file a run wrote, tolerantly (it may be older or damaged), by the
same keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from typing import Any

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.sequential import TestRule
from relmerge.io.records import Rejected
from relmerge.model import STEP_NAME, ExtractedRelation, StepIssue
from relmerge.run.cost import Cost


@dataclass(frozen=True)
class Tokens:
    prompt: int = 0
    completion: int = 0
    total: int = 0


@dataclass(frozen=True)
class Budget:
    """``max_llm_requests`` / ``max_tokens`` and whether the run spent them."""

    max_requests: int | None = None
    max_tokens: int | None = None
    exhausted: bool = False


@dataclass(frozen=True)
class Breaker:
    """The circuit breaker: after how many unanswered groups it opens, whether it did, and
    the requests it refused since."""

    after_groups: int = 0
    open: bool = False
    refused_requests: int = 0


@dataclass(frozen=True)
class Canaries:
    """The canary questions (``relmerge.run.canaries``): how many were asked, answered
    (validly) and answered right, the agreement, and the verdict of the sequential test
    (``relmerge.decide.sequential``): ``verdict`` (trusted, distrusted, not_judged), the
    ``rule`` it applied, the answers it had when it crossed a boundary
    (``decided_after``), its ``evidence`` then, and ``reason``, the verdict in words.
    ``distrusted``: the model's merges were not applied; ``reworked_chunks``: chunks
    worked again without it. ``rate``: the share of requests canaries asked alone may
    add; ``tokens``: the share of a packed request's prompt tokens its canaries may add."""

    rate: float = 0.0
    asked: int = 0
    answered: int = 0
    right: int = 0
    agreement: float | None = None
    verdict: str = "not_judged"
    rule: dict[str, Any] = field(default_factory=dict)
    decided_after: dict[str, Any] | None = None
    evidence: float = 0.0
    distrusted: bool = False
    reason: str | None = None
    reworked_chunks: int = 0
    in_requests: int = 0  # of ``asked``: mixed into the blocks' own requests
    extra_requests: int = 0  # of ``asked``: asked as requests of their own
    tokens: float = 0.0


def canary_figures(desk: Any, config: DeduplicateRelationsConfig) -> Canaries:
    """The result's ``canaries`` from the run's desk (None: no chunk was worked)."""
    if desk is None:
        return Canaries(
            config.canaries, rule=TestRule.of(config).figures(), tokens=config.canary_tokens
        )
    test = desk.test
    verdict = desk.figures()
    return Canaries(
        config.canaries,
        test.asked,
        test.answered,
        test.right,
        test.agreement,
        verdict["verdict"],
        verdict["rule"],
        verdict["decided_after"],
        verdict["evidence"],
        desk.reason is not None,
        verdict["reason"],
        desk.reworked,
        desk.mixed,
        desk.extra,
        config.canary_tokens,
    )


@dataclass(frozen=True, eq=False)
class RunResult:
    """The figures of one run, in the order of the result file's keys (see the module).

    Merges are counted where they fall: within one exact key (``exact_merge_count``) or
    across keys (``semantic_merge_count``); ``human_merge_count`` says how many of both a
    person's answers made (``relmerge review``, remembered), ``human_exact_merge_count``
    how many of those are exact merges. ``llm_needed_*``: what the rules left for an LLM
    or a person, where (blocks, tiers) and how much of it was judged on descriptions alone.
    ``llm_requests`` are requests sent (retries included), cache hits apart;
    ``preflight_requests`` the endpoint checks before the run. ``seconds`` per stage (work
    overlaps: they may add up to more than ``total``); ``engine`` where the CPU went.
    ``cost``: tokens per task and, priced (:meth:`with_prices`), USD.
    ``fingerprint`` (the CLI and the step) and ``log_keys`` (the step) are set by the
    caller that knows them (:meth:`with_run`).
    """

    input_record_count: int
    rejected_count: int
    input_relation_count: int
    output_relation_count: int
    remapped_relation_count: int
    exact_merge_count: int
    semantic_merge_count: int
    human_merge_count: int
    human_exact_merge_count: int
    failed_group_count: int
    llm_needed_group_count: int
    llm_needed_pair_count: int
    llm_needed_block_count: int
    llm_needed_pair_tiers: dict[str, int]
    llm_needed_description_only_pair_count: int
    clarification_count: int
    exact_round_count: int
    semantic_round_count: int
    blocking: dict[str, int]
    decisions_by_tier: dict[str, int]
    embedding_model: str | None
    llm_model: str
    preflight_requests: int
    llm_requests: int
    llm_failed_requests: int
    llm_invalid_answers: int
    llm_cache_hits: int
    tokens: Tokens
    llm_budget: Budget
    llm_unavailable_group_count: int
    llm_circuit_breaker: Breaker
    chunk_count: int
    seconds: dict[str, float]
    engine: dict[str, Any]
    issues: tuple[StepIssue, ...]
    config: DeduplicateRelationsConfig
    step: str = STEP_NAME
    fingerprint: str | None = None
    log_keys: tuple[str, ...] | None = None
    canaries: Canaries = field(default_factory=Canaries)
    cost: Cost = field(default_factory=Cost)

    def with_prices(self, price_in: float | None, price_out: float | None) -> RunResult:
        """This result with its cost in USD (prices per million prompt / completion
        tokens; the CLI knows them from the LLM settings)."""
        return replace(self, cost=self.cost.priced(price_in, price_out))

    def with_run(self, fingerprint: str, log_keys: Sequence[str] | None = None) -> RunResult:
        """This result with the run's fingerprint (and, for the step, its logs' keys)."""
        keys = tuple(log_keys) if log_keys is not None else self.log_keys
        return replace(self, fingerprint=fingerprint, log_keys=keys)

    def to_dict(self) -> dict[str, Any]:
        """The result file's JSON object, serialised once (the same dict each time)."""
        return self._json

    @cached_property
    def _json(self) -> dict[str, Any]:
        return _json_object(self)

    def __repr__(self) -> str:
        return (
            f"RunResult({self.input_relation_count} relations in, "
            f"{self.output_relation_count} out, {self.llm_requests} LLM requests)"
        )


def _json_object(result: RunResult) -> dict[str, Any]:
    """The result as the file has always written it, key by key in this order."""
    data: dict[str, Any] = {
        "step": result.step,
        "input_record_count": result.input_record_count,
        "rejected_count": result.rejected_count,
        "input_relation_count": result.input_relation_count,
        "output_relation_count": result.output_relation_count,
        "remapped_relation_count": result.remapped_relation_count,
        "exact_merge_count": result.exact_merge_count,
        "semantic_merge_count": result.semantic_merge_count,
        "human_merge_count": result.human_merge_count,
        "human_exact_merge_count": result.human_exact_merge_count,
        "failed_group_count": result.failed_group_count,
        "llm_needed_group_count": result.llm_needed_group_count,
        "llm_needed_pair_count": result.llm_needed_pair_count,
        "llm_needed_block_count": result.llm_needed_block_count,
        "llm_needed_pair_tiers": dict(result.llm_needed_pair_tiers),
        "llm_needed_description_only_pair_count": result.llm_needed_description_only_pair_count,
        "clarification_count": result.clarification_count,
        "exact_round_count": result.exact_round_count,
        "semantic_round_count": result.semantic_round_count,
        "blocking": dict(result.blocking),
        "decisions_by_tier": dict(result.decisions_by_tier),
        "embedding_model": result.embedding_model,
        "llm_model": result.llm_model,
        "preflight_requests": result.preflight_requests,
        "llm_requests": result.llm_requests,
        "llm_failed_requests": result.llm_failed_requests,
        "llm_invalid_answers": result.llm_invalid_answers,
        "llm_cache_hits": result.llm_cache_hits,
        "tokens": asdict(result.tokens),
        "cost": result.cost.to_dict(),
        "llm_budget": asdict(result.llm_budget),
        "llm_unavailable_group_count": result.llm_unavailable_group_count,
        "llm_circuit_breaker": asdict(result.llm_circuit_breaker),
        "canaries": asdict(result.canaries),
        "chunk_count": result.chunk_count,
        "seconds": dict(result.seconds),
        "engine": result.engine,
        "issues": [issue.model_dump(mode="json") for issue in result.issues],
        "config": result.config.model_dump(mode="json"),
    }
    if result.fingerprint is not None:
        data["fingerprint"] = result.fingerprint
    if result.log_keys is not None:
        data["log_keys"] = list(result.log_keys)
    return data


@dataclass(repr=False)
class RunOutput:
    """Everything a run produced; the step turns it into artifacts, the CLI into files.

    ``relations`` in input order (of their first member), kept as their JSON bytes until
    read (see ``run.writer.OutputRelations``); ``relation_keys`` their store keys, in the
    same order; ``relation_id_mapping`` every valid input id → its output id; ``summary``
    the run's figures (``result``: their JSON object); ``log_keys`` the logs' store keys,
    as written."""

    relations: Sequence[ExtractedRelation]
    relation_keys: list[str]
    relation_id_mapping: dict[str, str]
    summary: RunResult
    rejected: list[Rejected] = field(default_factory=list)
    issues: list[StepIssue] = field(default_factory=list)
    log_keys: list[str] = field(default_factory=list)

    @property
    def result(self) -> dict[str, Any]:
        """The result file's JSON object (``summary.to_dict()``)."""
        return self.summary.to_dict()

    def __repr__(self) -> str:  # the full repr of a large run costs seconds
        return f"RunOutput({len(self.relations)} relations, {len(self.rejected)} rejected)"
