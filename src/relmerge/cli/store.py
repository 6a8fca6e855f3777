"""``relmerge store``: create, load, inspect, dump and undo a relation store (DESIGN §8).

URL is ``sqlite:///PATH`` or ``postgresql://…``; a wrong scheme, an unreachable server or
a store of another schema version is one line and exit 2 (the group's error handler).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click
import orjson
from rich import box
from rich.console import Console
from rich.table import Table

from relmerge.cli.apply_step import plural
from relmerge.cli.interrupt import Interrupted, exit_interrupted, run_interruptible
from relmerge.cli.progress_view import LineProgress, RichProgress
from relmerge.graphstore import (
    SCHEMA_VERSION,
    ApplyResult,
    RelationStore,
    open_graph_store,
    redact_store_url,
)
from relmerge.graphstore.files import CheckedRecords, dump_to_file, read_graph
from relmerge.graphstore.schema import MIGRATES_FROM
from relmerge.io.load import JsonlInput, read_entities
from relmerge.io.records import Rejected
from relmerge.progress import Progress

T = TypeVar("T")
_REASONS_SHOWN = 5


def _run(main: Coroutine[Any, Any, T], interrupted: str) -> T:
    try:
        return run_interruptible(main, interrupted)
    except Interrupted as error:
        exit_interrupted(error, interrupted)


async def _with_store(url: str, use: Callable[[RelationStore], Coroutine[Any, Any, T]]) -> T:
    async with open_graph_store(url) as store:
        return await use(store)


def _view(quiet: bool) -> RichProgress | LineProgress:
    console = Console(stderr=True, quiet=quiet)
    return RichProgress(console) if console.is_terminal else LineProgress(console)


_URL = click.argument("url", metavar="URL")
_QUIET = click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")


@click.group("store", short_help="Keep a growing graph in a relation store (SQLite, PostgreSQL).")
def store_group() -> None:
    """A relation store keeps a deduplicated graph between runs, with every batch that
    changed it, so that a batch can be undone.

    URL: sqlite:///relative/path.db, sqlite:////absolute/path.db (a file, the embedded
    default) or postgresql://USER:PASSWORD@HOST:PORT/DB, postgresql:///DB?host=/socket/dir
    (a server; pip install 'relmerge[postgres]'). Passwords are never printed.
    """


@store_group.command("init")
@_URL
def init_command(url: str) -> None:
    """Create a relation store's tables at URL (a SQLite file is created if missing).

    Running it again on a store changes nothing; a store of another schema version is
    refused.
    """

    async def go(store: RelationStore) -> tuple[bool, str | None]:
        return await store.init(), await store.meta_value("migrated_at")

    created, migrated = _run(_with_store(url, go), "interrupted — nothing was created")
    shown = redact_store_url(url)
    if created:
        click.echo(f"Created a relmerge store (schema version {SCHEMA_VERSION}) at {shown}.")
    elif migrated:
        click.echo(
            f"{shown} is a relmerge store of schema version {SCHEMA_VERSION}, upgraded from "
            f"version {MIGRATES_FROM} at {migrated} (its relations kept, each its own member)."
        )
    else:
        click.echo(
            f"{shown} is already a relmerge store (schema version {SCHEMA_VERSION}): nothing to do."
        )


@store_group.command("load")
@_URL
@click.argument("input_path", metavar="INPUT")
@click.option(
    "--entities",
    "entities_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Entities JSONL (entity_id, name, type, profile) to store with the relations.",
)
@click.option(
    "--batch-id",
    help="Name of the batch (default: load- and a digest of its content, so loading the "
    "same graph twice changes nothing).",
)
@click.option(
    "--rejected",
    "rejected_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the records set aside, with their reasons, to this JSONL file.",
)
@_QUIET
def load_command(
    url: str,
    input_path: str,
    entities_path: Path | None,
    batch_id: str | None,
    rejected_path: Path | None,
    quiet: bool,
) -> None:
    """Insert a graph that is already deduplicated into the store at URL, as it is.

    INPUT: a relations JSONL file (what `relmerge import` writes), a JSON array, Parquet,
    a folder of relation JSON files (a run's deduplicated_relations/), or a `relmerge run`
    output folder. Records are checked as `relmerge run` checks them: a bad one is set
    aside with its reason and not stored. Nothing is decided: relations keep their ids and
    content. A relation id the store already holds with the same content is counted as
    unchanged; with other content the whole load is refused (a stored relation keeps its
    id and content: merge such a batch with `relmerge merge-into` instead). The load is
    one batch, applied whole or not at all, that `relmerge store undo` can take back.
    """
    entities = read_entities(entities_path) if entities_path is not None else []

    async def go(store: RelationStore) -> tuple[ApplyResult, CheckedRecords]:
        records = CheckedRecords(await read_graph(input_path))
        with _view(quiet) as view:
            result = await store.load(
                records,
                batch_id=batch_id,
                entities=entities,
                progress=_load_progress(view, records),
            )
            view.finish("read")
            view.finish("load")
        return result, records

    result, records = _run(_with_store(url, go), "interrupted — nothing of the batch was stored")
    shown = redact_store_url(url)
    _report_rejected(records.rejected, rejected_path)
    counts = result.counts
    if result.status == "already_applied":
        click.echo(f"Batch {result.batch_id} is already in {shown}: nothing changed.")
        return
    click.echo(
        f"Loaded batch {result.batch_id} into {shown}: "
        f"{plural(counts.inserted, 'relation')} inserted, "
        f"{counts.unchanged:,} already stored as they are, "
        f"{plural(counts.entities, 'entity', 'entities')} written, "
        f"{plural(len(records.rejected), 'record')} set aside."
    )


def _load_progress(view: Progress, records: CheckedRecords) -> Callable[[int], None]:
    """Bytes of a streamed file read (it is read as it is stored), else records."""
    source = records.records
    if isinstance(source, JsonlInput):
        view.start("read", source.total_bytes)
        done = [0]

        def advance_bytes(_: int) -> None:
            view.advance("read", source.bytes_read - done[0])
            done[0] = source.bytes_read

        return advance_bytes
    total = len(source) if isinstance(source, list) else None
    view.start("load", total)
    seen = [0]

    def advance_records(_: int) -> None:
        view.advance("load", records.read - seen[0])
        seen[0] = records.read

    return advance_records


def _report_rejected(rejected: list[Rejected], path: Path | None) -> None:
    if path is not None:
        path.write_bytes(b"".join(orjson.dumps(item.to_dict()) + b"\n" for item in rejected))
    for item in rejected[:_REASONS_SHOWN]:
        click.echo(f"set aside: {item.origin}: {item.reason}", err=True)
    if len(rejected) > _REASONS_SHOWN:
        where = f" (all in {path})" if path is not None else " (--rejected FILE lists them all)"
        click.echo(f"… and {len(rejected) - _REASONS_SHOWN:,} more{where}", err=True)


@store_group.command("dump")
@_URL
@click.argument("out", metavar="OUT.jsonl", type=click.Path(path_type=Path))
@_QUIET
def dump_command(url: str, out: Path, quiet: bool) -> None:
    """Write every stored relation to OUT.jsonl as ExtractedRelation JSON, one per line, in
    the order stored, ids as stored. OUT is replaced whole when the dump is complete."""

    async def go(store: RelationStore) -> int:
        total = (await store.info(last=0)).relations
        with _view(quiet) as view:
            view.start("write", total)
            written = await dump_to_file(store, out, lambda n: view.advance("write", n))
            view.finish("write")
        return written

    written = _run(_with_store(url, go), f"interrupted — {out} was not written")
    click.echo(f"Dumped {plural(written, 'relation')} from {redact_store_url(url)} to {out}.")


@store_group.command("undo")
@_URL
@click.argument("batch_id", metavar="BATCH_ID")
def undo_command(url: str, batch_id: str) -> None:
    """Undo the batch BATCH_ID: the relations it changed get their earlier content back,
    the ones it inserted are removed, in one transaction.

    Refused (exit 2) when a later batch changed the same relations or maps input ids to
    relations it inserted: undo those first, newest first (`relmerge store info URL`
    lists the batches).
    """

    async def go(store: RelationStore) -> Any:
        return await store.undo(batch_id)

    result = _run(_with_store(url, go), "interrupted — nothing was undone")
    shown = redact_store_url(url)
    if result.status == "already_undone":
        click.echo(f"Batch {batch_id} in {shown} was already undone: nothing changed.")
        return
    click.echo(
        f"Undid batch {batch_id} in {shown}: removed {plural(result.removed, 'relation')} it "
        f"inserted, restored {result.restored:,} it updated."
    )


@store_group.command("info")
@_URL
@click.option("--last", default=5, show_default=True, help="How many recent batches to list.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as one JSON object.")
def info_command(url: str, last: int, as_json: bool) -> None:
    """Schema version, how many relations, pairs, entities and batches the store holds,
    and its last batches."""

    async def go(store: RelationStore) -> Any:
        return await store.info(last=max(last, 0))

    info = _run(_with_store(url, go), "interrupted")
    batches = [
        {
            "batch_id": b.batch_id,
            "kind": b.kind,
            "status": b.status,
            "applied_at": b.applied_at,
            "undone_at": b.undone_at,
            **b.counts.to_dict(),
        }
        for b in info.last_batches
    ]
    figures = {
        "url": redact_store_url(url),
        "schema_version": info.schema_version,
        "relations": info.relations,
        "pairs": info.pairs,
        "entities": info.entities,
        "batches": info.batches,
    }
    if as_json:
        click.echo(orjson.dumps({**figures, "last_batches": batches}, option=orjson.OPT_INDENT_2))
        return
    rows = [_batch_row(batch) for batch in batches]
    if not sys.stdout.isatty():
        # A pipe or a log: every figure and batch id whole, whatever $COLUMNS says.
        for line in _plain(figures, rows):
            click.echo(line)
        return
    console = Console()
    table = Table(title=f"relmerge store {figures['url']}", show_header=False)
    table.add_column(overflow="fold")
    table.add_column(justify="right", overflow="fold")
    for key, value in list(figures.items())[1:]:
        table.add_row(key.replace("_", " "), f"{value:,}")
    console.print(table)
    if rows:
        _batch_table(console, rows)


_BATCH_COLUMNS = ("batch", "kind", "status", "applied (UTC)", "inserted", "updated")


def _batch_row(batch: dict[str, Any]) -> tuple[str, ...]:
    return (
        batch["batch_id"],
        batch["kind"],
        batch["status"],
        batch["applied_at"][:16].replace("T", " "),
        f"{batch['inserted']:,}",
        f"{batch['updated']:,}",
    )


def _plain(figures: dict[str, Any], rows: list[tuple[str, ...]]) -> list[str]:
    """``store info`` as plain text: no table to crop, columns as wide as their values."""
    lines = [f"relmerge store {figures['url']}"]
    lines += [
        f"  {key.replace('_', ' ')}: {value:,}" for key, value in figures.items() if key != "url"
    ]
    if rows:
        lines.append("last batches (newest first):")
        table = [_BATCH_COLUMNS, *rows]
        widths = [max(len(row[i]) for row in table) for i in range(len(_BATCH_COLUMNS))]
        for row in table:
            cells = [
                cell.rjust(width) if i >= 4 else cell.ljust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=True))
            ]
            lines.append("  " + "  ".join(cells).rstrip())
    return lines


def _batch_table(console: Console, rows: list[tuple[str, ...]]) -> None:
    """On a terminal: every column kept; a narrow one folds its cells (the batch id
    `relmerge store undo` takes stays whole, over two lines) rather than vanish."""
    table = Table(title="last batches (newest first)", box=box.SIMPLE, pad_edge=False)
    for index, column in enumerate(_BATCH_COLUMNS):
        table.add_column(column, justify="right" if index >= 4 else "left", overflow="fold")
    for row in rows:
        table.add_row(*row)
    console.print(table)
