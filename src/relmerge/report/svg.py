"""Matplotlib figures as inline SVG that is safe to put in one page many times.

Figures are built on an Agg canvas without pyplot (no global backend switch in the
caller's process). Text is drawn as paths so the page needs no font; ids are prefixed per
plot because several inline SVGs share one HTML id space; comments and metadata (which
repeat label text and carry external URLs) are dropped.

Drawn as paths, a label is no text a reader can hover or a test can read, so every text
group carries its words in ``data-text`` (and a ``<title>`` tooltip where a chart gives
one: the code behind a plain label). Artists a chart names with a gid ``kind-rest``
(``bar-0-merge``, ``legend-outcomes``, ``axes-cosine``) get ``class="kind"``; axes also
get their limits as ``data-xmin`` … ``data-ymax``.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

# Typed loosely: matplotlib's stubs want a Literal key type that a module constant lacks.
STYLE: dict[Any, Any] = {
    "svg.fonttype": "path",
    "svg.hashsalt": "relmerge-report",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.axisbelow": True,
}
_UNSAFE = re.compile(r"[^A-Za-z0-9 _.,:;/#()+=%'-]")
_TEXT = "text-"
_NAMED_GROUP = re.compile(r'<g id="([a-z]+)-([^"]*)">')


def label(text: str, limit: int = 40) -> str:
    """Text from the run's files made safe for a plot: ASCII only (the path font has no
    CJK glyphs), no ``$`` (mathtext), cut to ``limit`` characters."""
    text = _UNSAFE.sub("?", text)
    return text if len(text) <= limit else text[: limit - 1] + "~"


@dataclass
class Chart:
    """One plot: its figure (tests read its axes), its name (the id prefix) and title,
    and tooltips by visible text."""

    fig: Figure
    name: str
    title: str
    hints: dict[str, str] = field(default_factory=dict)

    def svg(self) -> str:
        return to_svg(self)


@contextmanager
def figure(width: float, height: float) -> Iterator[Figure]:
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(width, height), layout="constrained")
        FigureCanvasAgg(fig)
        yield fig


def draw(fig: Figure) -> None:
    """Lay the figure out and draw it as the page will (the report's style)."""
    with matplotlib.rc_context(STYLE):
        fig.canvas.draw()


def _tag_texts(fig: Figure, count: list[int]) -> bool:
    """Name each visible, unnamed text ``text-N``; whether any was new (a draw can make
    ticks that the previous one did not)."""
    new = False
    for text in fig.findobj(Text):
        if text.get_gid() is None and text.get_visible() and text.get_text().strip():
            text.set_gid(f"{_TEXT}{count[0]}")
            count[0] += 1
            new = True
    return new


def _save(fig: Figure) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    return buffer.getvalue()


def _markup(chart: Chart) -> dict[str, tuple[str, str]]:
    """By gid: the attributes a named group gets, and what it holds first (a tooltip)."""
    found: dict[str, tuple[str, str]] = {}
    for text in chart.fig.findobj(Text):
        gid = text.get_gid()
        if gid is not None:
            words = text.get_text()
            hint = chart.hints.get(words)
            tooltip = f"<title>{html.escape(hint, quote=False)}</title>" if hint else ""
            found[gid] = (f' data-text="{html.escape(words, quote=True)}"', tooltip)
    for ax in chart.fig.findobj(Axes):
        gid = ax.get_gid()
        if gid is not None:
            (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
            limits = {"xmin": x0, "xmax": x1, "ymin": y0, "ymax": y1}
            found[gid] = ("".join(f' data-{k}="{v:g}"' for k, v in limits.items()), "")
    return found


def to_svg(chart: Chart) -> str:
    fig, name = chart.fig, chart.name
    with matplotlib.rc_context(STYLE):
        count = [0]
        fig.canvas.draw()
        _tag_texts(fig, count)
        text = _save(fig)
        for _ in range(3):
            if not _tag_texts(fig, count):
                break
            text = _save(fig)
    markup = _markup(chart)
    text = text[text.index("<svg") :]
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)

    def named(match: re.Match[str]) -> str:
        kind, gid = match.group(1), f"{match.group(1)}-{match.group(2)}"
        attributes, inner = markup.get(gid, ("", ""))
        return f'<g id="{gid}" class="{kind}"{attributes}>{inner}'

    text = _NAMED_GROUP.sub(named, text)
    text = re.sub(r'\bid="([^"]+)"', rf'id="{name}-\1"', text)
    text = re.sub(r'(href="#|url\(#)', rf"\g<1>{name}-", text)
    aria = label(chart.title, 120).replace('"', "")
    # Never drawn larger than made: every plot keeps the same text size on the page.
    width = re.search(r'width="([0-9.]+)pt"', text)
    style = f' style="max-width: {width.group(1)}pt"' if width else ""
    return text.replace("<svg", f'<svg class="plot" role="img" aria-label="{aria}"{style}', 1)
