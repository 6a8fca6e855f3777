"""Matplotlib figures as inline SVG that is safe to put in one page many times.

Figures are built on an Agg canvas without pyplot (no global backend switch in the
caller's process). Text is drawn as paths so the page needs no font; ids are prefixed per
plot because several inline SVGs share one HTML id space; comments and metadata (which
repeat label text and carry external URLs) are dropped.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

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
_UNSAFE = re.compile(r"[^A-Za-z0-9 _.,:;/#()+=%-]")


def label(text: str, limit: int = 40) -> str:
    """Text from the run's files made safe for a plot: ASCII only (the path font has no
    CJK glyphs), no ``$`` (mathtext), cut to ``limit`` characters."""
    text = _UNSAFE.sub("?", text)
    return text if len(text) <= limit else text[: limit - 1] + "~"


@contextmanager
def figure(width: float, height: float) -> Iterator[Figure]:
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(width, height), layout="constrained")
        FigureCanvasAgg(fig)
        yield fig


def to_svg(fig: Figure, name: str, title: str) -> str:
    with matplotlib.rc_context(STYLE):
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = re.sub(r'\bid="([^"]+)"', rf'id="{name}-\1"', text)
    text = re.sub(r'(href="#|url\(#)', rf"\g<1>{name}-", text)
    aria = label(title, 120).replace('"', "")
    # Never drawn larger than made: every plot keeps the same text size on the page.
    width = re.search(r'width="([0-9.]+)pt"', text)
    style = f' style="max-width: {width.group(1)}pt"' if width else ""
    return text.replace("<svg", f'<svg class="plot" role="img" aria-label="{aria}"{style}', 1)
