"""Render every command's ``--help`` as Markdown for the documentation site.

The site's CLI reference (``docs/reference/cli.md``) is filled from this when the site is
built (``docs/hooks.py``), so it is never a checked-in copy that can go stale; a test
checks that every command reaches the page.
"""

from __future__ import annotations

from collections.abc import Iterator

import click

from relmerge.cli import main

# The width the help is wrapped at on the page: a terminal's 80 columns, which is what a
# code block of the site's theme shows without a scroll bar.
WIDTH = 80


def _context(command: click.Command, name: str, parent: click.Context | None) -> click.Context:
    return click.Context(
        command, parent=parent, info_name=name, terminal_width=WIDTH, max_content_width=WIDTH
    )


def iter_commands(
    group: click.Group = main, name: str = "relmerge"
) -> Iterator[tuple[str, click.Command, click.Context]]:
    """Every command under ``group``, the group itself first, depth first, sorted by name:
    ``(full name, command, context)``, the context carrying the parents' names for the
    usage line."""

    def walk(
        command: click.Command, path: str, parent: click.Context | None
    ) -> Iterator[tuple[str, click.Command, click.Context]]:
        context = _context(command, path.rsplit(" ", 1)[-1], parent)
        yield path, command, context
        if isinstance(command, click.Group):
            for sub_name in sorted(command.list_commands(context)):
                sub = command.get_command(context, sub_name)
                if sub is not None and not sub.hidden:
                    yield from walk(sub, f"{path} {sub_name}", context)

    yield from walk(group, name, None)


def render_cli_reference(heading: str = "##") -> str:
    """Markdown: for each command a heading ``relmerge NAME`` and its whole ``--help`` as a
    code block."""
    parts: list[str] = []
    for path, command, context in iter_commands():
        parts += [f"{heading} {path}", "", "```text", command.get_help(context).rstrip(), "```", ""]
    return "\n".join(parts)


if __name__ == "__main__":
    print(render_cli_reference(), end="")
