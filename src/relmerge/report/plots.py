"""The report's plots: each a :class:`Chart` (or None when there is nothing to draw),
turned into inline SVG by :func:`all_plots`.

Read by someone new to the run: labels are plain words (:mod:`relmerge.report.words`) with
the code in a tooltip; counts have whole-number ticks; a band that is off is said to be
off, never drawn at its sentinel (a cosine axis stretched to -1 by a band that decides
nothing); no legend sits on the data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.container import BarContainer
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

from relmerge.report.model import (
    OUTCOMES,
    THRESHOLDS,
    Decisions,
    IssueCount,
    LLMUsage,
    ReportData,
    band_on,
    outcome_of,
)
from relmerge.report.svg import Chart, figure, label
from relmerge.report.words import BAND_LINES, BANDS, SCORES, code_hint, plain, term

COLORS = {
    "merge": "#2e7d32",
    "split": "#66bb6a",
    "partial_merge": "#a5d6a7",
    "keep_both": "#9e9e9e",
    "failed": "#c62828",
    "policy": "#f9a825",
    "other": "#6d4c41",
    "any": "#1565c0",
}
SEVERITY_COLORS = {"info": "#1565c0", "warning": "#f9a825", "error": "#c62828"}
_STAGES = {"exact": 0, "semantic": 1, "judge": 2}
_MAX_SIZE = 12  # cluster sizes above this share one bar
_BIN = 0.025  # cosine histogram bin width
_LEGEND_ROW = 0.3  # inches a row of a legend below the axes takes


def all_plots(data: ReportData) -> dict[str, str | None]:
    charts = {
        "decisions": decisions_chart(data.decisions),
        "scores": scores_chart(data.decisions, data.thresholds),
        "clusters": cluster_chart(data.cluster_sizes),
        "llm": llm_chart(data.llm),
        "issues": issues_chart(data.issues),
        "seconds": seconds_chart(data.seconds),
    }
    return {key: chart.svg() if chart else None for key, chart in charts.items()}


def whole_numbers(axis: Axis) -> None:
    """Ticks of a count axis: whole numbers only (no "0.25 pairs")."""
    axis.set_major_locator(MaxNLocator(nbins="auto", steps=[1, 2, 5, 10], integer=True))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))


def _annotate(ax: Axes, bars: BarContainer, values: Sequence[float], fmt: str) -> None:
    labels = [fmt.format(v) for v in values]
    ax.bar_label(bars, labels=labels, padding=2, fontsize=8)


def decision_row(stage: str, tier: str) -> str:
    """A decisions row's label: where and by whom, in plain words."""
    return label(f"{plain('stage', stage)}: {plain('tier', tier)}", 48)


def decision_rows(decisions: Decisions) -> list[tuple[tuple[str, str], dict[str, int]]]:
    """(stage, tier) and the counts by verdict: stage by stage, the most decisions first."""
    return sorted(
        decisions.by_stage_tier.items(),
        key=lambda row: (_STAGES.get(row[0][0], 9), -sum(row[1].values()), row[0][1]),
    )


def decisions_chart(decisions: Decisions) -> Chart | None:
    """Decisions per stage and tier, stacked by outcome: where the merges come from."""
    rows = decision_rows(decisions)
    if not rows:
        return None
    outcomes = [_sum_outcomes(tier, counts) for (_, tier), counts in rows]
    present = [o for o in OUTCOMES if any(o in row for row in outcomes)]
    names = [decision_row(stage, tier) for (stage, tier), _ in rows]
    hints = {
        name: f"{term('tier', tier).explain} (stage: {stage}, tier: {tier})"
        for name, ((stage, tier), _) in zip(names, rows, strict=True)
    }
    hints.update({OUTCOMES[o]: f"outcome: {o}" for o in present})
    columns = min(3, len(present))
    legend_rows = math.ceil(len(present) / columns)
    with figure(6.4, 1.3 + 0.3 * len(rows) + _LEGEND_ROW * legend_rows) as fig:
        ax = fig.subplots()
        left = np.zeros(len(rows))
        rows_at = np.arange(len(rows))  # positions, not names: two labels may sanitise alike
        for outcome in present:
            values = np.array([row.get(outcome, 0) for row in outcomes], dtype=float)
            bars = ax.barh(
                rows_at, values, left=left, color=COLORS[outcome], label=OUTCOMES[outcome]
            )
            for row, (patch, value) in enumerate(zip(bars.patches, values, strict=True)):
                if value > 0:
                    patch.set_gid(f"bar-{row}-{outcome}")
            left += values
        merges = [row.get("merge", 0) for row in outcomes]
        texts = [_merge_text(int(t), m) for t, m in zip(left, merges, strict=True)]
        ax.bar_label(bars, labels=texts, padding=3, fontsize=8)
        ax.set_yticks(rows_at, names)
        ax.invert_yaxis()
        ax.set_xlim(0, max(left) * 1.3 or 1)
        whole_numbers(ax.xaxis)
        ax.set_xlabel("decisions (lines of decisions.jsonl)")
        ax.set_title("Who decided, and how it ended")
        ax.set_gid("axes-decisions")
        # Below the axes, in room the layout keeps for it: never over a bar.
        legend = fig.legend(loc="outside lower center", ncols=columns, fontsize=8, frameon=False)
        legend.set_gid("legend-outcomes")
        return Chart(fig, "decisions", "decisions by stage, tier and outcome", hints)


def _sum_outcomes(tier: str, counts: dict[str, int]) -> dict[str, int]:
    sums: dict[str, int] = {}
    for verdict, count in counts.items():
        outcome = outcome_of(tier, verdict)
        sums[outcome] = sums.get(outcome, 0) + count
    return sums


def _merge_text(total: int, merges: int) -> str:
    if merges == total:
        return f"{total:,}, all merged"
    return f"{total:,} ({merges:,} merged)" if merges else f"{total:,}"


def cosine_span(values: Sequence[float], bands: Sequence[float]) -> tuple[float, float]:
    """The cosine axis: the data and the bands that are on, out to tenths, within [-1, 1],
    at least 0.2 wide."""
    points = [*values, *bands] or [0.0, 1.0]
    low = max(-1.0, math.floor(min(points) * 10 + 1e-9) / 10)
    high = min(1.0, math.ceil(max(points) * 10 - 1e-9) / 10)
    if high - low < 0.2:
        low, high = max(-1.0, high - 0.2), min(1.0, max(high, low + 0.2))
    return low, high


def scores_chart(decisions: Decisions, thresholds: dict[str, float | None]) -> Chart | None:
    """Fuzzy and cosine histograms of the scored semantic decisions, with the bands."""
    if not decisions.scored:
        return None
    hints: dict[str, str] = {}
    with figure(10, 3.9) as fig:
        axes = fig.subplots(1, 2)
        off: list[str] = []
        for ax, score in zip(axes, ("fuzzy", "cosine"), strict=True):
            off += _score_histogram(ax, decisions, score, thresholds, hints)
        handles, labels = axes[0].get_legend_handles_labels()
        for name in off:
            text = f"{BANDS[name].label}: off"
            handles.append(Line2D([], [], linestyle="none"))
            labels.append(text)
            hints[text] = f"{name} = {_value(thresholds.get(name))}: this band decides nothing"
        for outcome, text in OUTCOMES.items():
            hints.setdefault(text, f"outcome: {outcome}")
        legend = fig.legend(
            handles, labels, loc="outside lower center", ncols=min(len(labels), 6), fontsize=8
        )
        legend.set_gid("legend-scores")
        shown, total = len(decisions.scored), decisions.scored_total
        sampled = f" (random sample of {shown:,} of {total:,})" if shown < total else ""
        fig.suptitle(f"Scores of {shown:,} semantic pair decisions{sampled}", fontsize=10)
        return Chart(fig, "scores", "score distributions with band thresholds", hints)


def _value(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def _score_histogram(
    ax: Axes,
    decisions: Decisions,
    score: str,
    thresholds: dict[str, float | None],
    hints: dict[str, str],
) -> list[str]:
    """One score's histogram and its bands that are on; the names of those that are off."""
    values: dict[str, list[float]] = {outcome: [] for outcome in OUTCOMES}
    for pair in decisions.scored:
        value = pair.fuzzy if score == "fuzzy" else pair.cosine
        if value is not None:
            values[pair.outcome].append(value)
    present = [outcome for outcome in OUTCOMES if values[outcome]]
    everything = [v for outcome in present for v in values[outcome]]
    mine = {
        name: thresholds[name]
        for name, owner in THRESHOLDS.items()
        if owner == score and name in thresholds
    }
    bands = {name: v for name, v in mine.items() if v is not None and band_on(name, v)}
    if score == "fuzzy":
        low, high = 0.0, 100.0
        bins = [float(edge) for edge in np.linspace(0, 100, 41)]
    else:
        low, high = cosine_span(everything, list(bands.values()))
        count = max(1, round((high - low) / _BIN))
        bins = [float(edge) for edge in np.linspace(low, high, count + 1)]
    if present:
        ax.hist(
            [values[o] for o in present],
            bins=bins,
            stacked=True,
            color=[COLORS[o] for o in present],
            label=[OUTCOMES[o] for o in present],
        )
    for name, value in bands.items():
        text = label(f"{BAND_LINES[name]} {value:g} ")
        hints[text] = f"{BANDS[name].explain} ({name} = {value:g})"
        ax.axvline(value, color="#37474f", linestyle="--", linewidth=1)
        ax.text(
            value,
            0.98,
            text,
            transform=ax.get_xaxis_transform(),
            rotation=90,
            ha="right",
            va="top",
            fontsize=8,
            color="#37474f",
        )
    pad = (high - low) * 0.02
    ax.set_xlim(low - pad, high + pad)
    whole_numbers(ax.yaxis)
    words = SCORES[score].label
    ax.set_xlabel(
        f"{words} (fuzzy ratio of name + description)"
        if score == "fuzzy"
        else f"{words} (cosine of the relation vectors)"
    )
    ax.set_ylabel("pairs")
    ax.set_title(f"{words} ({score})")
    ax.set_gid(f"axes-{score}")
    ax.margins(y=0.12)
    return [name for name in mine if name not in bands]


def cluster_chart(sizes: dict[int, int]) -> Chart | None:
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
        _annotate(ax, bars, list(buckets.values()), "{:,.0f}")
        ax.set_yscale("log")
        ax.set_ylim(0.8, max(buckets.values()) * 3)
        # Whole numbers on the log axis too: 1, 10, 100 rather than 10^0, 10^1, 10^2.
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("input relations merged into one output relation")
        ax.set_ylabel("output relations (log scale)")
        ax.set_title("Cluster sizes")
        ax.set_gid("axes-clusters")
        return Chart(fig, "clusters", "cluster size histogram")


def llm_chart(llm: LLMUsage) -> Chart | None:
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
        _annotate(left, bars, list(requests.values()), "{:,.0f}")
        left.set_title("LLM requests")
        left.tick_params(axis="x", labelsize=8)
        bars = right.bar(list(tokens), list(tokens.values()), color=["#5e35b1", "#8e24aa"])
        _annotate(right, bars, list(tokens.values()), "{:,.0f}")
        right.set_title("LLM tokens")
        for ax, name in ((left, "requests"), (right, "tokens")):
            ax.margins(y=0.15)
            whole_numbers(ax.yaxis)
            ax.set_gid(f"axes-{name}")
        return Chart(fig, "llm", "LLM requests and tokens")


def issues_chart(issues: list[IssueCount]) -> Chart | None:
    if not issues:
        return None
    with figure(6.4, 1.2 + 0.3 * len(issues)) as fig:
        ax = fig.subplots()
        names = [label(f"{plain('issue', i.code)} ({i.severity})", 48) for i in issues]
        hints = {n: code_hint("issue", i.code) for n, i in zip(names, issues, strict=True)}
        counts = [i.count for i in issues]
        colors = [SEVERITY_COLORS.get(i.severity, "#616161") for i in issues]
        bars = ax.barh(np.arange(len(issues)), counts, color=colors)
        ax.set_yticks(np.arange(len(issues)), names)
        _annotate(ax, bars, counts, "{:,.0f}")
        ax.invert_yaxis()
        ax.margins(x=0.15)
        whole_numbers(ax.xaxis)
        ax.set_xlabel("issues")
        ax.set_title("Issues")
        ax.set_gid("axes-issues")
        return Chart(fig, "issues", "issues by kind", hints)


def seconds_chart(seconds: dict[str, float]) -> Chart | None:
    stages = {stage: value for stage, value in seconds.items() if stage != "total"}
    if not stages:
        return None
    total = seconds.get("total", sum(stages.values()))
    with figure(6.4, 1.1 + 0.3 * len(stages)) as fig:
        ax = fig.subplots()
        names = [label(plain("time", s)) for s in stages]
        hints = {n: code_hint("time", s) for n, s in zip(names, stages, strict=True)}
        bars = ax.barh(np.arange(len(stages)), list(stages.values()), color="#546e7a")
        ax.set_yticks(np.arange(len(stages)), names)
        _annotate(ax, bars, list(stages.values()), "{:.3g} s")
        ax.invert_yaxis()
        ax.margins(x=0.2)
        ax.set_xlabel("seconds")
        ax.set_title(f"Seconds per part of the run (total {total:.3g} s)")
        ax.set_gid("axes-seconds")
        return Chart(fig, "seconds", "seconds per part of the run", hints)
