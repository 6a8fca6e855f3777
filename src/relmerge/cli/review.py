"""``relmerge review OUT``: answer a run's pending clarifications, in the terminal or a
browser; revise or forget answers; apply them by running the command that made OUT again."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from relmerge.cli.apply_step import apply, explain_nothing_left, finish, plural, runnable
from relmerge.cli.pipe import StdoutConsole
from relmerge.errors import InputError
from relmerge.review.memory import AnswerMemory
from relmerge.review.queue import ANSWERS_FILE, CLARIFICATIONS_FILE, MEMORY_FILE, ReviewQueue
from relmerge.review.rerun import relmerge_line
from relmerge.review.terminal import TerminalReview

INTERRUPTED_EXIT = 130  # 128 + SIGINT, as every relmerge command


@click.command("review", short_help="Answer, revise or forget the questions of a run; apply them.")
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--web", is_flag=True, help="Serve a review page on 127.0.0.1 instead.")
@click.option("--port", type=int, default=8754, show_default=True, help="Port of --web.")
@click.option(
    "--revise",
    is_flag=True,
    help="Go through the answered questions too, each with its current answer: a new "
    "answer replaces it, [f] forgets it.",
)
@click.option(
    "--forget",
    "forget_ids",
    multiple=True,
    metavar="ID",
    help="Forget the answer to question ID (clarify_…, shown with each question); "
    "repeatable. The next run asks it again.",
)
@click.option(
    "--forget-all",
    is_flag=True,
    help=f"Forget every answer given in OUT, and every pair remembered in its {MEMORY_FILE}.",
)
@click.option(
    "--apply",
    "apply_now",
    is_flag=True,
    help="Apply the answers now, asking nothing: run again the command that made OUT "
    "(run, merge-into or reconcile; recorded in OUT/.relmerge/run.json), and exit with its "
    "status.",
)
def review_command(
    out: Path,
    web: bool,
    port: int,
    revise: bool,
    forget_ids: tuple[str, ...],
    forget_all: bool,
    apply_now: bool,
) -> None:
    """Answer the questions the last run into OUT left for a person, in the terminal (one
    key per answer) or a browser (--web). Each answer is saved at once in
    OUT/answers.jsonl and applies to every later run into OUT, by what it is about
    (OUT/answer_memory.jsonl), even after the run that asked it was replaced.

    Answers apply when the command that made OUT runs again: the review ends by printing
    it and, on a terminal, offering to run it. Deleting answers.jsonl, or a line of it,
    forgets those answers, as --forget does.

    Exit status: 0 done; 2 no run in OUT, an unknown ID, or bad usage; 130 interrupted
    (every answer given is saved); after applying, the status of the run."""
    if web and (forget_ids or forget_all or apply_now):
        raise click.UsageError("--forget, --forget-all and --apply work without --web")
    if forget_ids and forget_all:
        raise click.UsageError("--forget and --forget-all exclude each other")
    if apply_now and revise:
        raise click.UsageError("--apply asks nothing: review with --revise first, then apply")
    if not (out / CLARIFICATIONS_FILE).is_file() and not (out / ANSWERS_FILE).is_file():
        raise InputError(
            f"no {CLARIFICATIONS_FILE} in {out}: run `relmerge run`, `merge-into` or "
            "`reconcile` into it first"
        )
    queue = ReviewQueue(out)
    memory = AnswerMemory(out / MEMORY_FILE)
    answered = set(queue.answers)
    deleted = {memory.question_of(key) for key in memory.remembered_keys()} - {None, *answered}
    queue.memory(into=memory)  # answers deleted from answers.jsonl are forgotten now
    if deleted:
        click.echo(
            f"{plural(len(deleted), 'answer')} no longer in {out / ANSWERS_FILE} (deleted): "
            "forgotten, the next run asks again"
        )
    started = time.time()
    try:
        forgotten = len(deleted) + _forget(out, queue, memory, forget_ids, forget_all)
        if apply_now:
            apply(runnable(out))
        if forget_ids or forget_all:
            if revise:
                forgotten += _session(out, queue, web, port, revise)
        elif web or queue.to_review(revise):
            forgotten += _session(out, queue, web, port, revise)
        else:
            explain_nothing_left(out, queue, memory)
        queue.memory(into=memory)
        finish(out, queue, forgotten)
    except KeyboardInterrupt:
        queue.memory(into=memory)
        saved = queue.given_since(started)
        click.echo(
            f"interrupted — {plural(saved, 'answer')} saved in {out / ANSWERS_FILE}, "
            f"{len(queue.pending())} pending; continue: {relmerge_line('review', out)}; "
            f"apply: {relmerge_line('review', out, '--apply')}",
            err=True,
        )
        sys.exit(INTERRUPTED_EXIT)


def _forget(
    out: Path,
    queue: ReviewQueue,
    memory: AnswerMemory,
    forget_ids: tuple[str, ...],
    forget_all: bool,
) -> int:
    """``--forget`` / ``--forget-all``: the answers forgotten."""
    if forget_ids:
        queue.forget(list(forget_ids))
        queue.memory(into=memory)
        click.echo(f"forgot {plural(len(forget_ids), 'answer')}: the next run asks again")
        return len(forget_ids)
    if forget_all:
        answers, pairs = queue.forget_all(), memory.forget_all()
        click.echo(
            f"forgot {plural(answers, 'answer')} and {plural(pairs, 'remembered pair')} "
            f"in {out}: the next run asks again"
        )
        return answers or pairs
    return 0


def _session(out: Path, queue: ReviewQueue, web: bool, port: int, revise: bool) -> int:
    """The review itself, in a browser or the terminal; the answers it forgot."""
    console = StdoutConsole()
    started, before = time.time(), set(queue.answers)
    if web:
        from relmerge.review.web import serve

        serve(queue, port, console, revise=revise)
    else:
        TerminalReview(queue, console, revise).run()
    click.echo(
        f"{queue.given_since(started)} answered, {len(queue.pending())} pending; the "
        f"answers are saved in {out / ANSWERS_FILE}",
    )
    return len(before - set(queue.answers))
