"""MkDocs hook: fill the generated reference pages when the site is built.

A page holds a marker line; the build replaces it with Markdown rendered from the code
itself (the click commands' ``--help``, the pydantic config models), so the reference
cannot go stale. The file is excluded from the site (``exclude_docs`` in mkdocs.yml).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from relmerge.cli.help_doc import render_cli_reference
from relmerge.config_doc import render_config_reference

GENERATED: dict[str, Callable[[], str]] = {
    "<!-- generated: cli-reference -->": render_cli_reference,
    "<!-- generated: config-reference -->": render_config_reference,
}


def fill(markdown: str) -> str:
    """``markdown`` with every marker it holds replaced by its generated text."""
    for marker, render in GENERATED.items():
        if marker in markdown:
            markdown = markdown.replace(marker, render())
    return markdown


# Docstrings cross-reference in Sphinx's style (:class:`~relmerge.errors.ProviderError`);
# mkdocstrings leaves the role in the text. The page shows the name as code instead.
_ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|exc|obj):<code>(~?)([\w.]+)</code>")


def plain_roles(html: str) -> str:
    """``html`` with each Sphinx role shown as its name (``~`` keeps the last part only)."""
    return _ROLE.sub(lambda m: f"<code>{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}</code>", html)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """MkDocs event: runs on each page's Markdown before it is converted to HTML."""
    return fill(markdown)


def on_page_content(html: str, **kwargs: Any) -> str:
    """MkDocs event: runs on each page's HTML, the API docstrings rendered."""
    return plain_roles(html)
