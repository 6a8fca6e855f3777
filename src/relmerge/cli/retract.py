"""``relmerge store retract``: take documents or chunks back out of a relation store.

One batch of kind ``retract`` (``relmerge store undo`` reverts it); every id it takes back
is listed, never silently gone. Exit 0 when it applied, had nothing to do, or was a dry
run; exit 2 (the group's handler) on a store error or without a document or chunk.
"""

from __future__ import annotations

import click
import orjson

from relmerge.cli.interrupt import Interrupted, exit_interrupted, run_interruptible
from relmerge.graphstore import open_graph_store, redact_store_url
from relmerge.review.rerun import relmerge_line
from relmerge.run.retract import RetractResult, retract

_LISTED = 20  # ids listed per kind of change before "… and N more"


async def _retract(
    url: str, documents: tuple[str, ...], chunks: tuple[str, ...], dry: bool
) -> RetractResult:
    async with open_graph_store(url) as store:
        return await retract(store, documents, chunks, dry_run=dry)


@click.command("retract", short_help="Take documents or chunks back out of a store.")
@click.argument("url", metavar="URL")
@click.option(
    "--document",
    "documents",
    multiple=True,
    metavar="DOC",
    help="A document id whose relations are taken back (repeatable).",
)
@click.option(
    "--chunk",
    "chunks",
    multiple=True,
    metavar="CHUNK",
    help="A chunk id whose relations are taken back (repeatable).",
)
@click.option("--dry-run", is_flag=True, help="Say what would change; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
def retract_command(
    url: str, documents: tuple[str, ...], chunks: tuple[str, ...], dry_run: bool, as_json: bool
) -> None:
    """Remove what the documents DOC and chunks CHUNK contributed to the store at URL, as
    one batch that `relmerge store undo` reverts.

    A stored relation loses their chunk ids; one left with none is removed, and its ids
    are listed as retracted. A merged relation keeps only its other members' wording,
    rebuilt from their own records as the merge built it (no model call); where the model
    had written the merged text, its pair is listed for `relmerge reconcile URL --pending`
    to fuse again. Running it again changes nothing.
    """
    if not documents and not chunks:
        raise click.UsageError("give at least one --document or --chunk")
    try:
        result = run_interruptible(
            _retract(url, documents, chunks, dry_run), "interrupted — nothing was retracted"
        )
    except Interrupted as error:
        exit_interrupted(error, "interrupted — nothing was retracted")
    if as_json:
        click.echo(orjson.dumps(result.to_dict(), option=orjson.OPT_INDENT_2))
        return
    _report(result, redact_store_url(url))


def _n(count: int, word: str) -> str:
    """A count that agrees with its noun (``1 relation``, ``2 relations``)."""
    return f"{count:,} {word if count == 1 else word + 's'}"


def _what(result: RetractResult) -> str:
    parts = []
    if result.documents:
        parts.append("document(s) " + ", ".join(result.documents))
    if result.chunks:
        parts.append("chunk(s) " + ", ".join(result.chunks))
    return " and ".join(parts)


def _listed(ids: list[str]) -> str:
    shown = ", ".join(ids[:_LISTED])
    return shown + (f" … and {len(ids) - _LISTED:,} more" if len(ids) > _LISTED else "")


def _report(result: RetractResult, shown: str) -> None:
    if result.status == "nothing":
        click.echo(
            f"Nothing to retract in {shown}: no stored relation has {_what(result)} "
            "(taken back already, or never stored)."
        )
        return
    removed, rebuilt = result.of("removed"), result.of("rebuilt")
    trimmed = result.of("trimmed")
    verb = {"dry_run": "Would retract", "already_applied": "Already retracted"}.get(
        result.status, "Retracted"
    )
    click.echo(
        f"{verb} {_what(result)} from {shown} (batch {result.batch_id}): "
        f"{_n(len(result.retracted), 'id')} taken back; {_n(len(removed), 'relation')} "
        f"removed, {len(rebuilt):,} rebuilt from their other members, {len(trimmed):,} with "
        "members not known one by one."
    )
    if result.retracted:
        click.echo(f"retracted (mapped to nothing): {_listed(list(result.retracted))}")
    if removed:
        click.echo(f"removed relations: {_listed([c.relation_id for c in removed])}")
    if rebuilt:
        click.echo(f"rebuilt relations: {_listed([c.relation_id for c in rebuilt])}")
    renamed = [f"{c.relation_id} → {c.renamed_to}" for c in result.changes if c.renamed_to]
    if renamed:
        click.echo("new ids (the stored id came from a member taken back): " + _listed(renamed))
    if trimmed:
        click.echo(
            "members unknown (a store made before members were kept): chunk ids removed, "
            f"wording kept: {_listed([c.relation_id for c in trimmed])}"
        )
    refused = result.refused_pairs
    if refused:
        click.echo(
            f"{_n(len(refused), 'pair')} had merged text the model wrote, rebuilt from the "
            f"members' own texts: run `{relmerge_line('reconcile', shown, '--pending')}` to fuse "
            "them again."
        )
    if result.status == "dry_run":
        click.echo("Dry run: nothing was written.")
    elif result.status == "applied":
        click.echo(f"Undo with: {relmerge_line('store', 'undo', shown, result.batch_id)}")
