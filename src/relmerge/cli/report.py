"""``relmerge report OUT``: write a self-contained HTML report of the run in OUT."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("report", short_help="Write an HTML report of the run in OUT.")
@click.argument("out", type=click.Path(path_type=Path))
@click.option(
    "--output",
    "-o",
    "target",
    type=click.Path(path_type=Path, dir_okay=False),
    help="HTML file to write [default: OUT/report.html].",
)
@click.option(
    "--sample",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Merged groups and pending clarifications shown.",
)
@click.option(
    "--input",
    "input_path",
    type=click.Path(path_type=Path),
    help="The run's INPUT, to show the names and descriptions of merged members "
    "(OUT keeps only their ids).",
)
def report_command(out: Path, target: Path | None, sample: int, input_path: Path | None) -> None:
    """Plots (decisions by stage and tier, scores with the band thresholds, cluster sizes,
    LLM requests and tokens, issues, time per stage), a sample of merged groups and the
    pending clarifications of the run in OUT, as one HTML file with no external assets.
    Prints the file's path."""
    from relmerge.report import write_report  # matplotlib: loaded only for this command

    click.echo(str(write_report(out, target, input_path, sample)))
