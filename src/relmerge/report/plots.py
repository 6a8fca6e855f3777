"""The report's plots, each an inline SVG string (or None when there is nothing to draw)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.container import BarContainer
from matplotlib.ticker import MaxNLocator

from relmerge.report.model import (
    OUTCOMES,
    THRESHOLDS,
    Decisions,
    IssueCount,
    LLMUsage,
    ReportData,
    outcome_of,
)
from relmerge.report.svg import figure, label, to_svg

COLORS = {
    "merge": "#2e7d32",
    "keep_both": "#9e9e9e",
    "policy": "#f9a825",
    "other": "#c62828",
    "any": "#1565c0",
}
SEVERITY_COLORS = {"info": "#1565c0", "warning": "#f9a825", "error": "#c62828"}
_STAGES = {"exact": 0, "semantic": 1, "judge": 2}
_MAX_SIZE = 12  # cluster sizes above this share one bar


def all_plots(data: ReportData) -> dict[str, str | None]:
    return {
        "decisions": decisions_plot(data.decisions),
        "scores": scores_plot(data.decisions, data.thresholds),
        "clusters": cluster_plot(data.cluster_sizes),
        "llm": llm_plot(data.llm),
        "issues": issues_plot(data.issues),
        "seconds": seconds_plot(data.seconds),
    }


def _annotate(ax: Axes, bars: BarContainer, values: Sequence[float], fmt: str) -> None:
    labels = [fmt.format(v) for v in values]
    ax.bar_label(bars, labels=labels, padding=2, fontsize=8)


def decisions_plot(decisions: Decisions) -> str | None:
    """Decisions per stage and tier, stacked by outcome: where the merges come from."""
    rows = sorted(
        decisions.by_stage_tier.items(),
        key=lambda row: (_STAGES.get(row[0][0], 9), -sum(row[1].values()), row[0][1]),
    )
    if not rows:
        return None
    outcomes = [_sum_outcomes(tier, counts) for (_, tier), counts in rows]
    present = [o for o in OUTCOMES if any(o in row for row in outcomes)]
    names = [label(f"{stage} / {tier}") for (stage, tier), _ in rows]
    with figure(6.4, 1.1 + 0.3 * len(rows)) as fig:
        ax = fig.subplots()
        left = np.zeros(len(rows))
        rows_at = np.arange(len(rows))  # positions, not names: two labels may sanitise alike
        for outcome in present:
            values = np.array([row.get(outcome, 0) for row in outcomes], dtype=float)
            bars = ax.barh(
                rows_at, values, left=left, color=COLORS[outcome], label=OUTCOMES[outcome]
            )
            left += values
        merges = [row.get("merge", 0) for row in outcomes]
        texts = [_merge_text(int(t), m) for t, m in zip(left, merges, strict=True)]
        ax.bar_label(bars, labels=texts, padding=3, fontsize=8)
        ax.set_yticks(rows_at, names)
        ax.invert_yaxis()
        ax.set_xlim(0, max(left) * 1.3 or 1)
        ax.set_xlabel("decisions (decisions.jsonl lines)")
        ax.set_title("Decisions by stage / tier and outcome")
        ax.legend(loc="lower right", fontsize=8)
        return to_svg(fig, "decisions", "decisions by stage, tier and outcome")


def _sum_outcomes(tier: str, counts: dict[str, int]) -> dict[str, int]:
    sums: dict[str, int] = {}
    for verdict, count in counts.items():
        outcome = outcome_of(tier, verdict)
        sums[outcome] = sums.get(outcome, 0) + count
    return sums


def _merge_text(total: int, merges: int) -> str:
    if merges == total:
        return f"{total} merge"
    return f"{total} ({merges} merge)" if merges else str(total)


def _verdict_order(verdict: str) -> tuple[int, str]:
    order = {"merge": 0, "keep_both": 1}
    return order.get(verdict, 2), verdict


def scores_plot(decisions: Decisions, thresholds: dict[str, float | None]) -> str | None:
    """Fuzzy and cosine histograms of the scored semantic decisions, with the bands."""
    if not decisions.scored:
        return None
    with figure(10, 3.6) as fig:
        axes = fig.subplots(1, 2)
        for ax, score in zip(axes, ("fuzzy", "cosine"), strict=True):
            _score_histogram(ax, decisions, score, thresholds)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=8)
        shown, total = len(decisions.scored), decisions.scored_total
        sampled = f" (random sample of {shown} of {total})" if shown < total else ""
        fig.suptitle(f"Scores of {shown} semantic pair decisions{sampled}", fontsize=10)
        return to_svg(fig, "scores", "score distributions with band thresholds")


def _score_histogram(
    ax: Axes, decisions: Decisions, score: str, thresholds: dict[str, float | None]
) -> None:
    values: dict[str, list[float]] = {outcome: [] for outcome in OUTCOMES}
    for pair in decisions.scored:
        value = pair.fuzzy if score == "fuzzy" else pair.cosine
        if value is not None:
            values[pair.outcome].append(value)
    present = [outcome for outcome in OUTCOMES if values[outcome]]
    everything = [v for outcome in present for v in values[outcome]]
    if score == "fuzzy":
        bins = np.linspace(0, 100, 41)
    else:
        low = min(0.0, np.floor(min(everything, default=0.0) * 10) / 10)
        bins = np.linspace(low, 1, round((1 - low) / 0.025) + 1)
    if present:
        ax.hist(
            [values[o] for o in present],
            bins=[float(edge) for edge in bins],
            stacked=True,
            color=[COLORS[o] for o in present],
            label=[OUTCOMES[o] for o in present],
        )
    for name, owner in THRESHOLDS.items():
        value = thresholds.get(name)
        if owner != score or value is None:
            continue
        ax.axvline(value, color="#37474f", linestyle="--", linewidth=1)
        ax.text(
            value,
            0.98,
            f"{name} {value:g} ",
            transform=ax.get_xaxis_transform(),
            rotation=90,
            ha="right",
            va="top",
            fontsize=8,
            color="#37474f",
        )
    ax.set_xlabel("fuzzy ratio (name + description)" if score == "fuzzy" else "embedding cosine")
    ax.set_ylabel("pairs")
    ax.set_title(f"{score} score")
    ax.margins(y=0.12)


def cluster_plot(sizes: dict[int, int]) -> str | None:
    """How many input relations each output relation stands for."""
    if not sizes:
        return None
    buckets: dict[str, int] = {}
    for size, count in sorted(sizes.items()):
        key = str(size) if size <= _MAX_SIZE else f">{_MAX_SIZE}"
        buckets[key] = buckets.get(key, 0) + count
    with figure(6.4, 3.2) as fig:
        ax = fig.subplots()
        colors = [COLORS["keep_both"] if k == "1" else COLORS["merge"] for k in buckets]
        bars = ax.bar(list(buckets), list(buckets.values()), color=colors)
        _annotate(ax, bars, list(buckets.values()), "{:.0f}")
        ax.set_yscale("log")
        ax.set_ylim(0.8, max(buckets.values()) * 3)
        ax.set_xlabel("members (input relations) per output relation")
        ax.set_ylabel("output relations (log)")
        ax.set_title("Cluster sizes")
        return to_svg(fig, "clusters", "cluster size histogram")


def llm_plot(llm: LLMUsage) -> str | None:
    """Requests (sent, from the cache, failed, invalid answers) and tokens."""
    requests = {
        "sent": llm.requests,
        "cache hits": llm.cache_hits,
        "failed": llm.failed,
        "invalid answers": llm.invalid,
    }
    tokens = {"prompt": llm.prompt_tokens, "completion": llm.completion_tokens}
    if not any(requests.values()) and not any(tokens.values()):
        return None
    with figure(6.4, 3.0) as fig:
        left, right = fig.subplots(1, 2, width_ratios=[2, 1])
        colors = ["#1565c0", "#00897b", "#c62828", "#f9a825"]
        bars = left.bar(list(requests), list(requests.values()), color=colors)
        _annotate(left, bars, list(requests.values()), "{:.0f}")
        left.set_title("LLM requests")
        left.tick_params(axis="x", labelsize=8)
        bars = right.bar(list(tokens), list(tokens.values()), color=["#5e35b1", "#8e24aa"])
        _annotate(right, bars, list(tokens.values()), "{:,.0f}")
        right.set_title("LLM tokens")
        for ax in (left, right):
            ax.margins(y=0.15)
        return to_svg(fig, "llm", "LLM requests and tokens")


def issues_plot(issues: list[IssueCount]) -> str | None:
    if not issues:
        return None
    with figure(6.4, 1.2 + 0.3 * len(issues)) as fig:
        ax = fig.subplots()
        names = [label(f"{i.code} ({i.severity})") for i in issues]
        counts = [i.count for i in issues]
        colors = [SEVERITY_COLORS.get(i.severity, "#616161") for i in issues]
        bars = ax.barh(np.arange(len(issues)), counts, color=colors)
        ax.set_yticks(np.arange(len(issues)), names)
        _annotate(ax, bars, counts, "{:.0f}")
        ax.invert_yaxis()
        ax.margins(x=0.15)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("issues")
        ax.set_title("Issues by code")
        return to_svg(fig, "issues", "issues by code")


def seconds_plot(seconds: dict[str, float]) -> str | None:
    stages = {stage: value for stage, value in seconds.items() if stage != "total"}
    if not stages:
        return None
    total = seconds.get("total", sum(stages.values()))
    with figure(6.4, 1.1 + 0.3 * len(stages)) as fig:
        ax = fig.subplots()
        bars = ax.barh([label(s) for s in stages], list(stages.values()), color="#546e7a")
        _annotate(ax, bars, list(stages.values()), "{:.3g} s")
        ax.invert_yaxis()
        ax.margins(x=0.2)
        ax.set_xlabel("seconds")
        ax.set_title(f"Seconds per stage (total {total:.3g} s)")
        return to_svg(fig, "seconds", "seconds per stage")
