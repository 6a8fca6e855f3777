"""The ``relmerge`` command group; maps relmerge errors to a one-line message and exit 2."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from relmerge.cli.convert import export_command, import_command
from relmerge.cli.demo import demo_command
from relmerge.cli.eval import eval_command
from relmerge.cli.graphiti import graphiti_group
from relmerge.cli.judge import judge_command
from relmerge.cli.lightrag import lightrag_group
from relmerge.cli.merge_into import merge_into_command
from relmerge.cli.pipe import exit_broken_pipe, stdout_gone
from relmerge.cli.reconcile import reconcile_command
from relmerge.cli.report import report_command
from relmerge.cli.retract import retract_command
from relmerge.cli.review import review_command
from relmerge.cli.run import run_command
from relmerge.cli.store import store_group
from relmerge.errors import RelmergeError
from relmerge.review.rerun import ARGV_META
from relmerge.version import __version__


class _Group(click.Group):
    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        ctx.meta[ARGV_META] = list(args)  # the command line as typed, for the command to record
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            value = super().invoke(ctx)
            # What is still buffered goes now, so that a reader gone by then is seen here.
            sys.stdout.flush()
            return value
        except RelmergeError as error:
            # One line whatever the message holds (a path or value with a line break).
            click.echo(f"error: {' '.join(str(error).splitlines())}", err=True)
            sys.exit(2)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except Exception as error:
            # The reader of our output went away (`| head -1`); a socket's or a helper's
            # broken pipe is a failure like any other.
            if isinstance(error, BrokenPipeError) and stdout_gone():
                exit_broken_pipe()
            if os.environ.get("RELMERGE_DEBUG"):
                raise
            click.echo(
                f"internal error: {type(error).__name__}: {error} "
                "(set RELMERGE_DEBUG=1 for a traceback, and please report it)",
                err=True,
            )
            sys.exit(1)


@click.group(cls=_Group)
@click.version_option(version=__version__, prog_name="relmerge")
def main() -> None:
    """relmerge: deduplicate the relations of LLM-extracted knowledge graphs."""


main.add_command(run_command)
main.add_command(eval_command)
main.add_command(review_command)
main.add_command(judge_command)
main.add_command(import_command)
main.add_command(export_command)
main.add_command(report_command)
main.add_command(demo_command)
store_group.add_command(retract_command)
main.add_command(store_group)
main.add_command(merge_into_command)
main.add_command(reconcile_command)
main.add_command(lightrag_group)
main.add_command(graphiti_group)

__all__ = ["main"]
