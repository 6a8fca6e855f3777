"""``relmerge reconcile URL --output OUT [--apply]``: re-decide a store's pairs, stored
against stored, and write the proposal to OUT without changing the store (DESIGN §8);
with ``--apply``, also write it to the store as one logged batch of kind ``reconcile``
(``relmerge store undo URL BATCH`` takes it back). ``--pending`` reads only the pairs
batches changed since the last applied reconcile.

Why a proposal: a stored id is kept forever and nothing is deleted, so absorbing one
stored relation into another is written out for a person to read first. OUT holds
``reconcile_mapping.json`` (absorbed id -> surviving id), ``survivors.jsonl`` (each
survivor's proposed record, the absorbed ones folded in by the "nothing lost" rule),
``decisions.jsonl``, ``clarifications.jsonl`` (answer them with ``relmerge review OUT``
and run the same command again) and ``reconcile_result.json`` last; the command itself is
recorded in ``OUT/.relmerge/run.json``, so that the review offers this command, not
``relmerge run``. ``--dry-run`` writes nothing and needs no OUT.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import click
import orjson

from relmerge.cache import CACHE_FILE, RunCache
from relmerge.cli.interrupt import Interrupted, exit_interrupted, run_interruptible
from relmerge.cli.options import model_options, resolve_options
from relmerge.config import DeduplicateRelationsConfig
from relmerge.graphstore import open_graph_store
from relmerge.io.outdir import RUN_MARKER
from relmerge.io.write import jsonl
from relmerge.providers import get_embedder, get_llm, preflight
from relmerge.providers.use_embed import close_helpers
from relmerge.review import rerun
from relmerge.run.batch import answer_memory
from relmerge.run.reconcile import Reconcile, ReconcileOutput
from relmerge.stores import LocalStore

MAPPING_FILE = "reconcile_mapping.json"
SURVIVORS_FILE = "survivors.jsonl"
RESULT_FILE = rerun.RECONCILE_RESULT


@click.command("reconcile", short_help="Re-decide a store's pairs (a proposal; --output).")
@click.argument("url", metavar="URL")
@click.option(
    "--output",
    "-o",
    "out",
    type=click.Path(path_type=Path),
    help="Output directory: the proposed mapping, survivors and logs (not with --dry-run, "
    "which writes nothing).",
)
@model_options
@click.option("--semantic/--no-semantic", default=None, help="Run the semantic stage [on].")
@click.option("--concurrency", type=int, help="LLM requests in flight at once [8].")
@click.option("--no-cache", is_flag=True, help="Neither read nor write OUT's answer cache.")
@click.option("--no-preflight", is_flag=True, help="Skip the endpoints' check.")
@click.option(
    "--dry-run", is_flag=True, help="Count the blocks and pairs to decide; ask and write nothing."
)
@click.option(
    "--pending",
    is_flag=True,
    help="Only the pairs batches changed since the last applied reconcile (and those it "
    "left open): after merges with --llm none, each touched block is asked about once.",
)
@click.option(
    "--apply",
    "apply_it",
    is_flag=True,
    help="Also apply the proposal to the store as one batch (undo: relmerge store undo).",
)
@click.option("--quiet", "-q", is_flag=True, help="No summary.")
# long: click passes each option as a parameter; the body resolves them and hands over.
def reconcile_command(
    url: str,
    out: Path | None,
    semantic: bool | None,
    concurrency: int | None,
    no_cache: bool,
    no_preflight: bool,
    dry_run: bool,
    pending: bool,
    apply_it: bool,
    quiet: bool,
    **options: Any,
) -> None:
    """Re-decide the pairs of the relation store at URL, stored against stored, through
    the kernel `relmerge run` uses, and write the proposal to OUT: which stored
    relations would be absorbed into which survivor. The store is not changed, unless
    --apply: then the survivors are updated and the absorbed ids map to them, as one
    logged batch (its id is printed; `relmerge store undo URL BATCH` brings them back).

    Exit status: 0 done; 2 bad usage, a store that cannot be reached or has another
    schema version; 130 / 143 interrupted (run the same command again)."""
    config, settings, embedding_settings = resolve_options(
        options, {"semantic_merge": semantic, "concurrency": concurrency, "strict": None}
    )
    if dry_run:
        planned = run_interruptible(_plan(url, pending))
        click.echo(
            f"reconcile --dry-run {planned.pop('store_url')}: nothing asked, nothing written"
        )
        for name, value in planned.items():
            click.echo(f"  {name.replace('_', ' ')}: {value}")
        return
    if out is None:
        raise click.UsageError(
            "Missing option '--output' / '-o': the folder for the proposal "
            "(only --dry-run writes nothing and needs none)."
        )
    typed = click.get_current_context().meta.get(rerun.ARGV_META)
    command = rerun.record(typed, os.getcwd()) if isinstance(typed, list) else None
    cache = None if no_cache else RunCache(out / CACHE_FILE)
    llm = get_llm(settings)
    embedder = get_embedder(embedding_settings, cache) if config.semantic_merge else None
    try:
        output = run_interruptible(
            _reconcile(
                url, out, config, llm, embedder, cache, not no_preflight, apply_it, pending, command
            )
        )
    except Interrupted as error:
        exit_interrupted(error)
    finally:
        if cache is not None:
            cache.close()
        close_helpers()
    if not quiet:
        applied = output.figures.get("batch_id")
        done = f"applied as batch {applied}" if applied else "the store is unchanged"
        click.echo(f"reconcile: proposal written to {out} ({done})")
        for name, value in output.figures.items():
            click.echo(f"  {name.replace('_', ' ')}: {value}")
        if output.clarifications:
            click.echo(
                f"Answer them: {rerun.relmerge_line('review', out)}; then run this command again."
            )


async def _plan(url: str, pending: bool = False) -> dict[str, Any]:
    async with open_graph_store(url) as store:
        await store.info(last=0)
        planned = await Reconcile(store, semantic_merge_off(), pending=pending).plan()
        return {"store_url": store.url, **planned}


def semantic_merge_off() -> DeduplicateRelationsConfig:
    """A configuration that needs no embedder (a plan only reads)."""
    return DeduplicateRelationsConfig(semantic_merge=False)


async def _mark(out: Path, command: dict[str, Any] | None) -> None:
    """Record when this reconcile started and how, in ``OUT/.relmerge/run.json``:
    ``relmerge review OUT`` then names and offers this command, not ``relmerge run``."""
    marker: dict[str, Any] = {"started_at": time.time()}
    if command is not None:
        marker["command"] = command
    await LocalStore(out).put(RUN_MARKER, orjson.dumps(marker))


async def _reconcile(
    url: str,
    out: Path,
    config: DeduplicateRelationsConfig,
    llm: Any,
    embedder: Any,
    cache: RunCache | None,
    check: bool,
    apply_it: bool = False,
    pending: bool = False,
    command: dict[str, Any] | None = None,
) -> ReconcileOutput:
    """Store first (exit 2 naming it), endpoints, then the proposal; OUT written last."""
    async with open_graph_store(url) as store:
        await store.info(last=0)
        if check:
            await preflight(llm)
            if embedder is not None:
                await preflight(embedder)
        await _mark(out, command)  # before the answers are read: later ones are not applied
        reconcile = Reconcile(
            store,
            config,
            llm,
            embedder,
            memory=answer_memory(out),
            cache=cache,
            pending=pending,
        )
        output = await reconcile.propose()
        if apply_it and output.changes_store:
            applied = await reconcile.apply(output)
            output.figures["batch_id"] = applied.batch_id
            output.figures["batch_status"] = applied.status
        shown = store.url
    folder = LocalStore(out)
    await folder.put(SURVIVORS_FILE, jsonl(r.to_dict() for r in output.survivors))
    await folder.put(MAPPING_FILE, orjson.dumps(output.mapping, option=orjson.OPT_INDENT_2))
    if config.decisions_key:
        await folder.put(config.decisions_key, jsonl(output.decisions))
    if config.clarifications_key:
        await folder.put(config.clarifications_key, jsonl(output.clarifications))
    result = {
        "store_url": shown,
        **output.figures,
        "issues": [issue.model_dump(mode="json") for issue in output.issues],
    }
    await folder.put(RESULT_FILE, orjson.dumps(result, option=orjson.OPT_INDENT_2))
    return output
