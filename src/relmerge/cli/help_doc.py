"""Render every subcommand's ``--help`` into ``docs/cli.md`` (checked by a test)."""

from __future__ import annotations

import click

from relmerge.cli import main


def render_cli_reference() -> str:
    parts = ["# relmerge CLI reference", "", "Generated from `--help`; do not edit by hand.", ""]
    context = click.Context(main, info_name="relmerge", terminal_width=100, max_content_width=100)
    parts += ["## relmerge", "", "```", main.get_help(context), "```", ""]
    for name in sorted(main.list_commands(context)):
        command = main.get_command(context, name)
        if command is None:
            continue
        sub = click.Context(
            command, parent=context, info_name=name, terminal_width=100, max_content_width=100
        )
        parts += [f"## relmerge {name}", "", "```", command.get_help(sub), "```", ""]
    return "\n".join(parts)


if __name__ == "__main__":
    print(render_cli_reference(), end="")
