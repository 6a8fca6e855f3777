"""Griffe extension for the API reference: show docstrings' doctests as code.

relmerge's docstrings carry runnable ``>>>`` examples and reST ``::`` literal blocks;
Markdown would render a ``>>>`` line as a nested quote. This turns each doctest into a
fenced ``pycon`` block and a trailing ``::`` into ``:`` before mkdocstrings renders the
docstring. Loaded by mkdocstrings (``extensions`` in mkdocs.yml), excluded from the site.
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension, Object

_PROMPT = re.compile(r"^(\s*)>>> ")


def fence_doctests(text: str) -> str:
    """``text`` with every doctest (a ``>>>`` line up to the next blank line) fenced."""
    lines = text.splitlines()
    out: list[str] = []
    index = 0
    while index < len(lines):
        match = _PROMPT.match(lines[index])
        if match is None:
            line = lines[index]
            out.append(line[:-1] if line.endswith("::") else line)
            index += 1
            continue
        indent = match.group(1)
        out.append(f"{indent}```pycon")
        while index < len(lines) and lines[index].strip():
            out.append(lines[index])
            index += 1
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestFences(Extension):
    """Fence the doctests of every object's docstring as it is loaded."""

    def on_instance(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)
