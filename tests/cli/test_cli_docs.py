"""The CLI reference is generated from the click commands when the site is built; these
tests check that the generator reaches every command and every option."""

from __future__ import annotations

from pathlib import Path

import click

from relmerge.cli import main
from relmerge.cli.help_doc import iter_commands, render_cli_reference


def _all_commands(group: click.Group, prefix: str) -> dict[str, click.Command]:
    found: dict[str, click.Command] = {prefix: group}
    for name, command in group.commands.items():
        if command.hidden:
            continue
        if isinstance(command, click.Group):
            found |= _all_commands(command, f"{prefix} {name}")
        else:
            found[f"{prefix} {name}"] = command
    return found


def test_every_command_is_a_section_with_its_usage_line() -> None:
    page = render_cli_reference()
    commands = _all_commands(main, "relmerge")
    assert len(commands) > 1
    for path in commands:
        assert f"\n## {path}\n" in f"\n{page}", f"no section for `{path}`"
        assert f"Usage: {path} " in page, f"no usage line for `{path}`"


def test_every_option_of_every_command_is_on_the_page() -> None:
    page = render_cli_reference()
    for path, command in _all_commands(main, "relmerge").items():
        section = page.split(f"## {path}\n", 1)[1].split("\n## ", 1)[0]
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                for flag in [*param.opts, *param.secondary_opts]:
                    assert flag in section, f"`{path}` option {flag} missing from its section"


def test_iter_commands_walks_groups_depth_first_and_sorted() -> None:
    names = [path for path, _, _ in iter_commands()]
    assert names[0] == "relmerge"
    assert names[1:] == sorted(names[1:])
    # A nested group is walked too: its subcommands follow it, with the full name.
    inner = click.Group("inner", commands={"b": click.Command("b"), "a": click.Command("a")})
    outer = click.Group("outer", commands={"inner": inner, "z": click.Command("z")})
    walked = [(path, context.command_path) for path, _, context in iter_commands(outer, "x")]
    assert walked == [
        ("x", "x"),
        ("x inner", "x inner"),
        ("x inner a", "x inner a"),
        ("x inner b", "x inner b"),
        ("x z", "x z"),
    ]


def test_every_command_is_in_the_table_of_commands_in_short() -> None:
    """The page's table is written by hand: a new command must be added to it too."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli.md").read_text()
    table = page.split("<!-- generated: cli-reference -->", 1)[0]
    for name, command in main.commands.items():
        if not command.hidden:
            assert f"`relmerge {name}`" in table or f"/ `{name}`" in table, name
