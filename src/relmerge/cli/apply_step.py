"""The last step of a review: apply the answers by running the command that made OUT again.

``relmerge review`` ends here: it says what is left to apply, prints the command ready to
paste, and on a terminal offers to run it (one key press); ``--apply`` runs it without
asking. Where nothing is left to review it says where the answers that decided the rest
come from, and how to revise or forget them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from relmerge.errors import InputError
from relmerge.review.memory import AnswerMemory
from relmerge.review.queue import ANSWERS_FILE, MEMORY_FILE, ReviewQueue
from relmerge.review.rerun import (
    RunCommand,
    command_outline,
    recorded_command,
    relmerge_line,
    run_started_at,
)


def interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 relation``, ``2 relations`` (``many``: an irregular plural): a count agrees with
    its noun in every line the CLI prints."""
    return f"{count:,} {word if count == 1 else many or word + 's'}"


def confirm(question: str) -> bool:
    """``question [Y/n]``, one key press: Enter or y says yes."""
    click.echo(f"{question} [Y/n] ", nl=False)
    try:
        key = click.getchar().lower()
    except KeyboardInterrupt:
        click.echo()  # the interruption's line starts on a line of its own
        raise
    except EOFError:
        key = "n"
    click.echo("y" if key in ("\r", "\n") else key)
    return key in ("y", "\r", "\n")


def apply(command: RunCommand) -> None:
    """Run the command that made OUT, here and now; leave with its exit status."""
    click.echo(f"applying: {command.shell()}")
    raise SystemExit(command.run())


def runnable(out: Path) -> RunCommand:
    command = recorded_command(out)
    if command is None:
        raise InputError(
            f"{out} does not record the command that made it (an older relmerge, or the "
            f"Python API): run `{command_outline(out)}` again yourself"
        )
    if command.hidden:
        raise InputError(
            f"the command that made {out} hides secret values (<hidden>): run it yourself "
            f"with them filled in: {command.shell()}"
        )
    return command


def offer(out: Path, purpose: str, question: str) -> None:
    """Say how to do ``purpose`` ("apply the 2 new answers") in one step: run the command
    that made OUT again; on a terminal, offer to do it now."""
    command = recorded_command(out)
    if command is None:
        click.echo(
            f"To {purpose}, run `{command_outline(out)}` again with the options "
            "that made it (this OUT does not record its command)."
        )
        return
    if command.hidden:
        click.echo(
            f"To {purpose}, run the command that made {out} again, with its hidden "
            "values filled in:"
        )
        click.echo(f"  {command.shell()}")
        return
    click.echo(f"To {purpose}, run the command that made {out} again:")
    click.echo(f"  {command.shell()}")
    if not interactive():
        click.echo(f"(or: {relmerge_line('review', out, '--apply')})")
        return
    if confirm(question):
        apply(command)


def explain_nothing_left(out: Path, queue: ReviewQueue, memory: AnswerMemory) -> None:
    """Nothing is pending: say where the answers that decided the rest come from."""
    click.echo(f"nothing to review in {out}: the last run left no question without an answer.")
    given = len(queue.answers)
    unrecorded = sum(1 for key in memory.remembered_keys() if memory.question_of(key) is None)
    if given:
        click.echo(
            f"{plural(given, 'answer')} given in {out} ({ANSWERS_FILE}) decide their pairs "
            f"in every run into it, through {MEMORY_FILE}. Change one: "
            f"{relmerge_line('review', out, '--revise')}; forget: "
            f"{relmerge_line('review', out)} --forget ID or --forget-all "
            f"(or delete {ANSWERS_FILE}, or its line); the next run asks again."
        )
    if unrecorded:
        click.echo(
            f"{plural(unrecorded, 'pair')} in {MEMORY_FILE} keep an answer whose question "
            f"is not on record (an older relmerge, or an app's judge): "
            f"{relmerge_line('review', out, '--forget-all')} drops them."
        )


def finish(out: Path, queue: ReviewQueue, forgotten: int) -> None:
    """What is left to apply, and how: one short step."""
    unapplied = queue.given_since(run_started_at(out))
    if unapplied:
        purpose = f"apply the {plural(unapplied, 'new answer')}"
        if forgotten:
            purpose += f" (and ask the {plural(forgotten, 'forgotten question')} again)"
        offer(out, purpose, f"Apply the {plural(unapplied, 'answer')} now?")
    elif forgotten:
        purpose = f"ask the {plural(forgotten, 'forgotten question')} again"
        offer(out, purpose, "Run it now?")
