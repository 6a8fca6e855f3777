"""``relmerge import`` and ``relmerge export``: GraphRAG and LightRAG folders in and out.

The adapters (and pyarrow) are imported when a command runs, so that other commands start
as fast as before.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from relmerge.cli.apply_step import plural
from relmerge.cli.progress_view import progress_view
from relmerge.progress import Progress

FORMATS = ("graphrag", "lightrag")
EXPORT_NAME = "relmerge_export.json"
_FORMAT = click.Choice(FORMATS)


def _quote(path: Path) -> str:
    return shlex.quote(str(path))


def program() -> str:
    """How the user called relmerge (``.venv/bin/relmerge`` stays so), for the commands
    printed next: they must run as written."""
    called = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if called is not None and called.name == "relmerge" and len(called.parts) > 1:
        return shlex.quote(str(called))
    return "relmerge"


def _do_import(fmt: str, source: Path, progress: Progress) -> Any:
    if fmt == "graphrag":
        from relmerge.adapters.graphrag import import_graphrag

        return import_graphrag(source, progress)
    from relmerge.integrations.lightrag.folder import import_lightrag

    return import_lightrag(source, progress)


_QUIET = click.option("--quiet", "-q", is_flag=True, help="No progress bars or summary.")


@contextmanager
def _progress(quiet: bool) -> Iterator[Progress]:
    """Progress on stderr as ``relmerge run`` shows it: bars on a terminal, a line per
    phase otherwise, nothing with --quiet."""
    with progress_view(Console(stderr=True, quiet=quiet)) as view:
        yield view


def _echo(quiet: bool, line: str) -> None:
    """A summary line (none with --quiet; warnings are printed whatever it says)."""
    if not quiet:
        click.echo(line)


@click.command("import", short_help="Convert a GraphRAG or LightRAG graph into relmerge input.")
@click.argument("fmt", metavar="FORMAT", type=_FORMAT)
@click.argument("source", metavar="SRC", type=click.Path(path_type=Path))
@click.option(
    "--output",
    "-o",
    "output",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Folder for relations.jsonl, entities.jsonl and import.json (created if missing).",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace an import of another graph (or other files of these names) in --output.",
)
@_QUIET
def import_command(fmt: str, source: Path, output: Path, overwrite: bool, quiet: bool) -> None:
    """Convert SRC into relmerge input: relations.jsonl and entities.jsonl in --output.

    FORMAT graphrag: SRC is a GraphRAG output folder (relationships.parquet, with
    entities.parquet and text_units.parquet when present) or its relationships file; one
    record per relationship row. FORMAT lightrag: SRC is a LightRAG / nano-graphrag working
    folder (graph_chunk_entity_relation.graphml) or the GraphML file; one record per
    <SEP>-joined description of each edge. Prints the commands that deduplicate and export.
    An --output that holds another import is refused unless --overwrite (importing the
    same graph again changes nothing).
    """
    from relmerge.adapters.common import ENTITIES_FILE, RELATIONS_FILE, write_import
    from relmerge.io.foreign import check_import_format

    check_import_format(fmt, source, output)
    with _progress(quiet) as progress:
        imported = _do_import(fmt, source, progress)
        summary = write_import(imported, source, output, overwrite=overwrite, progress=progress)
    if quiet:
        return
    units = int(summary.get("relationships", summary.get("edges")) or 0)
    unit_name = "relationship" if fmt == "graphrag" else "edge"
    click.echo(
        f"Imported {plural(summary['relations'], 'relation')} from {plural(units, unit_name)} "
        f"and {plural(summary['entities'], 'entity', 'entities')} into {output}."
    )
    run_dir = output / "run"
    target = source.with_name(f"{source.name}-dedup") if source.is_dir() else output / "dedup"
    click.echo("Next: deduplicate, then write the deduplicated graph:")
    click.echo(
        f"  {program()} run {_quote(output / RELATIONS_FILE)} "
        f"--entities {_quote(output / ENTITIES_FILE)} --output {_quote(run_dir)}"
    )
    click.echo(
        f"  {program()} export {fmt} {_quote(run_dir)} --original {_quote(source)} "
        f"--to {_quote(target)}"
    )


@click.command("export", short_help="Write a deduplicated GraphRAG or LightRAG graph.")
@click.argument("fmt", metavar="FORMAT", type=_FORMAT)
@click.argument("out", metavar="OUT", type=click.Path(path_type=Path))
@click.option(
    "--original",
    required=True,
    type=click.Path(path_type=Path),
    help="The folder (or file) that `relmerge import` read, unchanged since.",
)
@click.option(
    "--to",
    "target",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Folder to write the deduplicated copy into (not the original).",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace a --to folder that is not empty (once the copy is complete).",
)
@_QUIET
def export_command(
    fmt: str, out: Path, original: Path, target: Path, overwrite: bool, quiet: bool
) -> None:
    """Write a copy of the original graph with the relations of the relmerge run in OUT.

    graphrag: the relationships table (Parquet or CSV, as the original) gets one row per
    output relation; kept rows keep their id and human_readable_id, a merged row is its
    first member's row with the merged description, summed weight and all text units.
    relationship_ids lists in other tables point at the kept rows, and citations of
    merged-away rows in community reports ("Relationships (12, 45)") are rewritten to
    the kept rows. lightrag: the GraphML keeps its nodes; each edge holds its distinct
    facts joined by <SEP>; the relation stores are updated, and vectors only LightRAG
    can re-embed are listed as stale. What the run did not change, and records it
    rejected, are written as they were. The copy is written beside --to and renamed into
    place when complete: a failure leaves --to as it was.
    """
    if fmt == "graphrag":
        from relmerge.adapters.graphrag import export_graphrag

        with _progress(quiet) as progress:
            summary = export_graphrag(out, original, target, overwrite=overwrite, progress=progress)
        repeats = (
            f", {plural(summary['rows_after'], 'row')} with GraphRAG's repeats"
            if summary["repeated_rows"]
            else ""
        )
        _echo(
            quiet,
            f"Wrote {plural(summary['relationships_after'], 'relationship')} "
            f"({summary['relationships_before']} before, "
            f"{plural(summary['merged_rows'], 'merged row')}{repeats}) and "
            f"{plural(summary['copied_files'], 'other file')} to {target}; "
            f"{plural(summary['citations_rewritten'], 'report citation')} rewritten "
            f"(see {EXPORT_NAME}).",
        )
        for name, reports in summary["stale"].items():
            click.echo(
                f"Stale: {name} embeds the full_content of {plural(len(reports), 'report')} "
                "as it "
                "was before their citations were rewritten (only citation numbers differ; "
                f"listed under 'stale' in {EXPORT_NAME})."
            )
        return
    from relmerge.integrations.lightrag.folder import export_lightrag

    with _progress(quiet) as progress:
        summary = export_lightrag(out, original, target, overwrite=overwrite, progress=progress)
    updated = ", ".join(summary["stores_updated"]) or "none"
    _echo(
        quiet,
        f"Wrote {plural(summary['edges_after'], 'edge')} ({summary['edges_before']} before, "
        f"{summary['edges_rewritten']} rewritten) holding "
        f"{plural(summary['descriptions_after'], 'description')} "
        f"({summary['descriptions_before']} before) and "
        f"{plural(summary['copied_files'], 'other file')} to {target}; "
        f"stores updated: {updated}.",
    )
    for number, line in enumerate(summary.get("rebuild", [])):
        click.echo(f"Stale: {line}" if number == 0 else line)
