"""The plots' figure data: axis limits, whole-number ticks, legends off the bars, plain
labels, and the SVG hooks (classes, ``data-text``, axis limits) the page test reads."""

from __future__ import annotations

import re

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from relmerge.report.html import reason_html
from relmerge.report.model import OUTCOMES, Decisions, IssueCount, LLMUsage, ScoredPair
from relmerge.report.plots import (
    cosine_span,
    decision_row,
    decisions_chart,
    issues_chart,
    llm_chart,
    scores_chart,
)
from relmerge.report.svg import Chart, draw
from relmerge.report.words import KINDS, plain

DEFAULTS: dict[str, float | None] = {
    "auto_keep_fuzzy": 30.0,
    "auto_merge_fuzzy": 90.0,
    "auto_keep_cosine": -1.0,  # off: nothing is below -1
    "auto_merge_cosine": 0.5,
    "similarity_threshold": 0.9,
}
CODES = {code for table in KINDS.values() for code in table}


def _decisions(rows: dict[tuple[str, str], dict[str, int]]) -> Decisions:
    return Decisions(by_stage_tier=rows, lines=sum(sum(c.values()) for c in rows.values()))


def _scored(cosines: list[float], outcome: str = "keep_both") -> Decisions:
    pairs = [ScoredPair(50.0, cosine, outcome) for cosine in cosines]
    return Decisions(scored=pairs, scored_total=len(pairs))


def _drawn(chart: Chart | None) -> Figure:
    assert chart is not None
    draw(chart.fig)
    return chart.fig


def _axes(fig: Figure, gid: str) -> Axes:
    return next(ax for ax in fig.axes if ax.get_gid() == gid)


def _texts(ax: Axes, axis: str) -> list[str]:
    labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    return [text.get_text() for text in labels]


def _band_lines(ax: Axes) -> list[float]:
    """Where the dashed band lines of a score axis stand, in order."""
    return sorted(float(np.asarray(line.get_xdata())[0]) for line in ax.get_lines())


def _legend_texts(fig: Figure) -> list[str]:
    return [text.get_text() for legend in fig.legends for text in legend.get_texts()]


def test_cosine_span_covers_the_data_and_the_bands_on() -> None:
    assert cosine_span([-0.13, 0.0, 0.85], [0.5, 0.9]) == (-0.2, 0.9)
    assert cosine_span([0.31, 0.42], []) == (0.3, 0.5)
    assert cosine_span([0.1], [-0.5]) == (-0.5, 0.1)
    assert cosine_span([0.999], []) == (0.8, 1.0)  # at least 0.2 wide, never past 1
    assert cosine_span([], []) == (0.0, 1.0)


def test_a_band_that_is_off_does_not_stretch_the_cosine_axis() -> None:
    fig = _drawn(scores_chart(_scored([-0.1, 0.2, 0.6, 0.8]), DEFAULTS))
    cosine = _axes(fig, "axes-cosine")
    low, high = cosine.get_xlim()
    assert -0.25 < low < -0.1 and 0.9 < high < 1.0
    assert "cosine keep-apart band: off" in _legend_texts(fig)
    assert _band_lines(cosine) == [0.5, 0.9]  # the bands on, and only those
    assert all(not re.fullmatch(r"[−-]1(\.0+)?", text) for text in _texts(cosine, "x"))


def test_a_band_that_is_on_is_drawn_and_spanned() -> None:
    thresholds = {**DEFAULTS, "auto_keep_cosine": -0.4, "auto_merge_cosine": None}
    fig = _drawn(scores_chart(_scored([0.1, 0.3]), thresholds))
    cosine = _axes(fig, "axes-cosine")
    assert cosine.get_xlim()[0] < -0.4
    assert _band_lines(cosine) == [-0.4, 0.9]
    texts = [t.get_text().strip() for t in cosine.texts]
    assert "keep apart below -0.4" in texts and "report entities from 0.9" in texts
    legend = _legend_texts(fig)
    assert "cosine merge band: off" in legend and "cosine keep-apart band: off" not in legend


def test_the_fuzzy_keep_band_at_zero_is_off() -> None:
    fig = _drawn(scores_chart(_scored([0.2]), {**DEFAULTS, "auto_keep_fuzzy": 0.0}))
    assert _band_lines(_axes(fig, "axes-fuzzy")) == [90.0]
    assert "fuzzy keep-apart band: off" in _legend_texts(fig)


def test_a_band_the_run_does_not_name_is_neither_drawn_nor_called_off() -> None:
    fig = _drawn(scores_chart(_scored([0.2, 0.4]), {}))
    assert _band_lines(_axes(fig, "axes-cosine")) == [] == _band_lines(_axes(fig, "axes-fuzzy"))
    assert not [text for text in _legend_texts(fig) if "off" in text]
    assert _axes(fig, "axes-cosine").get_xlim()[0] > 0


def _whole(values: list[float]) -> bool:
    return all(float(value).is_integer() for value in values)


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_count_axes_have_whole_number_ticks(count: int) -> None:
    decisions = _decisions({("semantic", "llm"): {"merge": count}})
    ax = _axes(_drawn(decisions_chart(decisions)), "axes-decisions")
    assert _whole(list(ax.get_xticks())) and len(ax.get_xticks()) >= 2
    fig = _drawn(scores_chart(_scored([0.3] * count), DEFAULTS))
    for gid in ("axes-fuzzy", "axes-cosine"):
        assert _whole(list(_axes(fig, gid).get_yticks()))
    fig = _drawn(llm_chart(LLMUsage(count, 0, 0, 0, count, 1)))
    for gid in ("axes-requests", "axes-tokens"):
        assert _whole(list(_axes(fig, gid).get_yticks()))
    fig = _drawn(issues_chart([IssueCount("llm_unavailable", "warning", count, "m")]))
    assert _whole(list(_axes(fig, "axes-issues").get_xticks()))


def _bars_and_legend(fig: Figure) -> tuple[list[Bbox], Bbox]:
    ax = _axes(fig, "axes-decisions")
    bars = [p.get_window_extent() for p in ax.patches if (p.get_gid() or "").startswith("bar-")]
    (legend,) = fig.legends
    return bars, legend.get_window_extent()


SHAPES = [
    # Few rows, one long bar: where a legend in the axes' corner sat on the bars.
    {("semantic", "policy"): {"keep_both": 799}, ("semantic", "fuzzy_high"): {"merge": 3}},
    {("exact", "identical"): {"merge": 1}},
    {
        ("exact", "llm"): {"merge": 5, "split": 2, "failed": 1},
        ("exact", "policy"): {"llm_needed": 4},
        ("semantic", "llm"): {"merge": 40, "partial_merge": 1},
        ("semantic", "remembered"): {"merge": 3, "keep_both": 30},
        ("semantic", "direction"): {"keep_both": 50},
        ("semantic", "odd"): {"odd_verdict": 2},
    },
]


@pytest.mark.parametrize("rows", SHAPES)
def test_the_decisions_legend_never_covers_a_bar(
    rows: dict[tuple[str, str], dict[str, int]],
) -> None:
    fig = _drawn(decisions_chart(_decisions(rows)))
    bars, legend = _bars_and_legend(fig)
    assert bars and legend.width > 0
    assert not [bar for bar in bars if bar.overlaps(legend)]
    ax = _axes(fig, "axes-decisions")
    assert not legend.overlaps(ax.get_window_extent())  # below the axes, not in them


def test_decision_rows_and_legend_speak_plain_words() -> None:
    rows = SHAPES[2]
    fig = _drawn(decisions_chart(_decisions(rows)))
    names = _texts(_axes(fig, "axes-decisions"), "y")
    assert names == [
        "exact stage: the LLM",
        "exact stage: nobody: unsure policy",
        "semantic stage: opposite directions",
        "semantic stage: the LLM",
        "semantic stage: a person's earlier answer",
        "semantic stage: odd",
    ]
    legend = _legend_texts(fig)
    assert legend == [
        OUTCOMES[o]
        for o in ("merge", "split", "partial_merge", "keep_both", "failed", "policy", "other")
    ]
    for text in [*names, *legend]:
        assert text not in CODES and "_" not in text, text


def test_labels_carry_their_code_in_a_tooltip_and_data_text() -> None:
    chart = decisions_chart(_decisions({("semantic", "remembered"): {"merge": 2}}))
    assert chart is not None
    svg = chart.svg()
    row = decision_row("semantic", "remembered")
    match = re.search(
        r'<g id="decisions-text-\d+" class="text" data-text="([^"]*)"><title>([^<]*)', svg
    )
    assert match is not None
    assert match[1] == row.replace("'", "&#x27;")
    assert match[2].endswith("(stage: semantic, tier: remembered)")
    assert svg.count('class="bar"') == 1 and svg.count('class="legend"') == 1
    assert re.search(
        r'<g id="decisions-axes-decisions" class="axes" data-xmin="0" data-xmax="[\d.]+"', svg
    )


def test_issue_bars_are_named_in_plain_words() -> None:
    fig = _drawn(issues_chart([IssueCount("possible_entity_duplicate", "info", 2, "m")]))
    (name,) = _texts(_axes(fig, "axes-issues"), "y")
    assert name == f"{plain('issue', 'possible_entity_duplicate')} (info)"


def test_a_clarification_reason_names_tier_and_guards_in_plain_words() -> None:
    reason = (
        "no language model; the rules could not decide "
        "(tier direction_unknown, guards: numbers, role)"
    )
    page = reason_html(reason)
    assert "direction unknown (no rule knows if it is symmetric)" in page
    assert ">numbers differ<" in page and ">roles differ<" in page
    assert 'title="' in page and "(tier: direction_unknown)" in page
    visible = re.sub(r"<[^>]+>", "", page)
    assert "direction_unknown" not in visible and "tier " not in visible
    assert reason_html("<b> (tier band)").startswith('&lt;b&gt;: <span class="term"')
