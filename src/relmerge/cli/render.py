"""Terminal rendering for the CLI: the summary table (progress: ``cli.progress_view``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import Any

from rich.table import Table

from relmerge.cli.apply_step import plural
from relmerge.decide.sequential import verdict_line
from relmerge.report.words import term
from relmerge.run.cost import Cost
from relmerge.run.estimate import Estimate
from relmerge.run.result import RunResult


def merge_rows(result: RunResult) -> list[tuple[str, int]]:
    """Merges by who made them: the exact and semantic stages (rules and LLM), and a
    person's answers (``relmerge review``) on a line of their own. The result counts a
    person's merges inside ``exact_merge_count`` / ``semantic_merge_count`` too (by where
    they fall); the table shows each merge once."""
    human = result.human_merge_count
    human_exact = result.human_exact_merge_count
    return [
        ("merged by exact stage", result.exact_merge_count - human_exact),
        ("merged by semantic stage", result.semantic_merge_count - (human - human_exact)),
        ("merged by a person's answers", human),
    ]


def summary_table(result: RunResult, out: str) -> Table:
    table = Table(title=f"relmerge run → {out}", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    rows = [
        ("input records", result.input_record_count),
        ("rejected (see rejected.jsonl)", result.rejected_count),
        ("valid input relations", result.input_relation_count),
        ("output relations", result.output_relation_count),
        *merge_rows(result),
        (
            "LLM rounds (exact / semantic)",
            f"{result.exact_round_count} / {result.semantic_round_count}",
        ),
        ("exact groups left unmerged for want of an LLM", result.llm_needed_group_count),
        ("pairs needing an LLM, no valid verdict (→ review)", result.llm_needed_pair_count),
        ("unsure → clarifications.jsonl", result.clarification_count),
        ("failed groups (originals kept)", result.failed_group_count),
        (
            "groups left for a re-run: LLM unavailable",
            result.llm_unavailable_group_count,
        ),
        ("endpoint checks before the run (preflight requests)", result.preflight_requests),
        ("LLM requests sent", result.llm_requests),
        ("LLM requests that failed (HTTP; retried)", result.llm_failed_requests),
        ("LLM answers that were invalid (retried)", result.llm_invalid_answers),
        ("LLM answers from the cache", result.llm_cache_hits),
        *canary_rows(result),
        *cost_rows(result),
        ("seconds", result.seconds["total"]),
    ]
    engine = result.engine
    if engine:
        if engine["name"] != "local":
            where = (
                f"{engine['name']}: {plural(engine['workers'], 'CPU')}, "
                f"{plural(len(engine['nodes']), 'node')}"
            )
            rows.append(("engine", where))
        elif engine.get("workers"):
            rows.append(("engine", f"local: {engine['workers']} worker processes"))
        rows.append(
            (
                "CPU seconds: driver / workers (driver's share)",
                f"{engine['driver_cpu_s']:.1f} / {engine['worker_cpu_s']:.1f} "
                f"({engine['driver_cpu_share']:.0%})",
            )
        )
        rows.extend(embedded_rows(engine))
    for label, value in rows:
        table.add_row(label, str(value))
    codes = Counter(issue.code for issue in result.issues)
    explained = []
    for code, count in sorted(codes.items()):
        words = term("issue", code)
        table.add_row(f"issue: {words.label}", str(count))
        explained.append(f"{words.label} ({code}): {words.explain}")
    if explained:  # what each issue means, under the table: a code alone says little
        table.caption = "\n".join(explained)
        table.caption_justify = "left"
    return table


def embedded_rows(engine: dict[str, Any]) -> list[tuple[str, object]]:
    """How many distinct texts were embedded, by which pass and why."""
    by = engine.get("texts_embedded_by") or {}
    if not engine.get("texts_embedded"):
        return []
    full = by.get("full_model_for_rules", 0) + by.get("full_model_for_report", 0)
    return [
        (
            "texts embedded: full model (rules / report) / first stage",
            f"{full} ({by.get('full_model_for_rules', 0)} / "
            f"{by.get('full_model_for_report', 0)}) / {by.get('first_stage', 0)}",
        )
    ]


def canary_rows(result: RunResult) -> list[tuple[str, object]]:
    """The canaries' line: the model's agreement on certain questions, with its count,
    and the verdict of the sequential test with the answers it was reached on."""
    canaries = result.canaries
    if not canaries.asked:
        return []
    return [("canary questions (certain answers)", verdict_line(asdict(canaries)))]


def cost_rows(result: RunResult) -> list[tuple[str, object]]:
    """The run's cost lines (see :func:`cost_lines`)."""
    return cost_lines(result.cost, result.tokens.total)


def cost_lines(cost: Cost, tokens: int) -> list[tuple[str, object]]:
    """Tokens in all (what the server counted, or characters where it counted none), per
    task, what the cache saved, and USD when the prices were given: ``relmerge run``'s
    summary and ``relmerge judge`` show the same lines."""
    rows: list[tuple[str, object]] = [("tokens", tokens)]
    if cost.measured == "none":
        return rows
    unit = "tokens" if cost.measured == "usage" else f"tokens ({cost.measured}: no usage)"
    for name, task in cost.tasks.items():
        if not task.requests:
            continue
        shown = (
            f"{plural(task.requests, 'request')}, "
            f"{task.prompt_tokens:,} / {task.completion_tokens:,}"
        )
        if task.unmetered:
            shown += f", {task.unmetered_prompt_chars:,} prompt chars without usage"
        rows.append((f"{name}: prompt / completion {unit}", shown))
    if cost.cache_hits:
        rows.append(("saved by cached answers (tokens)", f"{cost.saved_tokens:,}"))
    if cost.usd is not None:
        estimate = " (estimated from characters)" if cost.measured != "usage" else ""
        rows.append(
            (
                f"cost, USD at {cost.price_in:g} / {cost.price_out:g} per million{estimate}",
                f"{cost.usd:.4f} (cache saved {cost.saved_usd or 0:.4f})",
            )
        )
    return rows


def estimate_rows(estimate: Estimate) -> list[tuple[str, str]]:
    """``--dry-run``'s estimate of the LLM's work, per task, said to be one."""
    rows = [
        (
            f"estimate: {name} requests, prompt / completion tokens",
            f"{task.requests:,}, {task.prompt_tokens:,} / {task.completion_tokens:,}",
        )
        for name, task in estimate.tasks.items()
    ]
    rows.append(
        (
            "estimate: LLM requests, tokens (~4 characters a token)",
            f"{estimate.requests:,}, {estimate.prompt_tokens + estimate.completion_tokens:,}",
        )
    )
    if estimate.usd is not None:
        rows.append(("estimate: cost in USD", f"{estimate.usd:.4f}"))
    return rows
