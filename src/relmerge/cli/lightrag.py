"""``relmerge lightrag dedupe WORKING_DIR --output OUT`` and ``relmerge lightrag undo``: a
deduplication pass over a LightRAG instance in place, through LightRAG's own API
(``relmerge.integrations.lightrag``), and its undo.

The instance is opened as LightRAG's server opens it (``integrations.lightrag.instance``:
a dotenv storage config and the environment). OUT is a run as ``relmerge run`` writes it,
plus the pass's journal: ``relmerge review OUT`` answers its questions and re-runs the
command, and the same command run again after an interruption finishes the pass.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from relmerge.cli.apply_step import plural
from relmerge.cli.interrupt import Interrupted, exit_interrupted, run_interruptible
from relmerge.cli.options import pass_options, resolve_options
from relmerge.cli.progress_view import progress_view
from relmerge.cli.run import say_what_is_left
from relmerge.config import DeduplicateRelationsConfig, EmbeddingSettings, LLMSettings
from relmerge.errors import ProviderError
from relmerge.providers.use_embed import close_helpers
from relmerge.review import rerun
from relmerge.run.batch import RunRequest

_STORAGE_CONFIG_HELP = (
    "dotenv file configuring the instance as LightRAG's server reads its .env: "
    "LIGHTRAG_KV_STORAGE, LIGHTRAG_VECTOR_STORAGE, LIGHTRAG_GRAPH_STORAGE, "
    "LIGHTRAG_DOC_STATUS_STORAGE, WORKSPACE, the storages' own settings (POSTGRES_*, "
    "REDIS_URI, NEO4J_*, MONGO_*…; the environment wins over the file), and the "
    "embedding that re-embeds changed edges: EMBEDDING_BINDING_HOST (OpenAI-compatible "
    "base URL), EMBEDDING_MODEL, EMBEDDING_DIM, EMBEDDING_BINDING_API_KEY, or "
    "RELMERGE_EMBEDDING_FUNC=package.module:name [default: the environment alone; file "
    "storages; no embedding: the changed edges' vectors are listed as stale]."
)


@click.group("lightrag", short_help="Deduplicate the edges of a LightRAG instance in place.")
def lightrag_group() -> None:
    """Deduplicate the edges of a LightRAG instance in place, through LightRAG's own
    storage API (any storage LightRAG supports), and undo it. Each edge keeps its
    sources, weight and chunk list; repeated description fragments become one. Needs
    lightrag-hku (pip install relmerge[lightrag])."""


@lightrag_group.command("dedupe", short_help="Deduplicate a LightRAG instance's edges.")
@click.argument("working_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--output",
    "-o",
    "out",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Output directory: the run (as `relmerge run` writes it) and the pass's journal "
    "(lightrag/journal.json), which `relmerge lightrag undo` reads.",
)
@click.option(
    "--storage-config",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help=_STORAGE_CONFIG_HELP,
)
@click.option(
    "--document",
    "documents",
    multiple=True,
    metavar="ID",
    help="Only the edges this document contributed to; repeat for more [default: every edge].",
)
@click.option(
    "--track-id",
    metavar="ID",
    help="Only the edges of the documents of this track id (what LightRAG's insert returned).",
)
@click.option(
    "--wait",
    "wait_seconds",
    type=click.FloatRange(min=0),
    default=0.0,
    metavar="SECONDS",
    help="Wait this long for named documents LightRAG is still processing; those not "
    "processed by then are left out and listed [0].",
)
@pass_options
@click.option(
    "--redecide",
    is_flag=True,
    help="Judge every fragment again, also those earlier passes into OUT settled (after a "
    "change of model or settings) [default: new fragments against settled ones only].",
)
@click.option(
    "--quiet",
    "-q",
    is_flag=True,
    help="No progress bars or summary (stale vectors and documents left out are still said).",
)
# long: click passes each option as a parameter; the body resolves them and hands over.
def dedupe_command(
    working_dir: Path,
    out: Path,
    storage_config: Path | None,
    documents: tuple[str, ...],
    track_id: str | None,
    wait_seconds: float,
    semantic: bool | None,
    concurrency: int | None,
    max_llm_requests: int | None,
    canaries: float | None,
    cache: bool,
    overwrite: bool,
    redecide: bool,
    quiet: bool,
    **options: Any,
) -> None:
    """Deduplicate the edges of the LightRAG instance in WORKING_DIR (LightRAG's working
    folder; the storages are the storage config's): each edge's description fragments
    that say the same thing become one, through LightRAG's API, and the changed edges are
    re-embedded with the instance's embedding. OUT keeps the run and a journal of every
    edge changed: `relmerge review OUT` answers what the rules left undecided and re-runs
    this command; `relmerge lightrag undo WORKING_DIR OUT` takes the pass back.

    Exit status: 0 done; 2 bad usage, a storage config that cannot be read or names an
    unknown storage, an instance that cannot be opened, or an endpoint that is not there
    (one line says why); 3 done, but the LLM was unavailable for some groups, or its
    canary answers stopped it (run the same command again); 130 / 143 interrupted (run
    the same command again: it finishes the pass)."""
    if options.get("entities_path") is not None:
        raise click.UsageError("--entities is not for LightRAG: its entities come from the graph")
    config, settings, embedding_settings = resolve_options(
        options,
        {
            "semantic_merge": semantic,
            "concurrency": concurrency,
            "max_llm_requests": max_llm_requests,
            "canaries": canaries,
        },
    )
    typed = click.get_current_context().meta.get(rerun.ARGV_META)  # for `relmerge review`
    command = rerun.record(typed, os.getcwd()) if isinstance(typed, list) else None
    console = Console(stderr=True, quiet=quiet)
    job = _Dedupe(
        working_dir, storage_config, out, list(documents), track_id, wait_seconds, redecide
    )
    try:
        done, embedded = run_interruptible(
            job.run(config, settings, embedding_settings, cache, overwrite, command, console)
        )
    except Interrupted as error:
        exit_interrupted(error)
    finally:
        close_helpers()
    if not quiet:
        click.echo(f"relmerge lightrag dedupe {working_dir} → {out}")
        if done.resumed:
            click.echo(f"  finished the interrupted pass: {plural(done.edges_changed, 'edge')}")
        else:
            click.echo(f"  edges read: {done.edges_read:,}")
            click.echo(f"  edges changed: {done.edges_changed:,}")
            click.echo(
                f"  description fragments: {done.fragments_before:,} → {done.fragments_after:,}"
                + (
                    f" ({done.fragments_settled:,} settled by earlier passes)"
                    if done.fragments_settled
                    else ""
                )
            )
    try:
        if done.run is not None:
            request = RunRequest(
                str(working_dir), str(out), out, {}, None, None, overwrite, True, command
            )
            say_what_is_left(done.run, [], request, config, quiet, cached=cache)
    finally:
        _say_documents(done.waiting_documents, done.failed_documents, done.unknown_documents)
        _say_gone(done.gone_edges)
        _say_stale(done.stale_edges, out, embedded)


def quiet_lightrag() -> None:
    """LightRAG and its file vector storage log every storage they load at INFO: the
    command's own lines say what happened (RELMERGE_DEBUG=1 keeps their logs)."""
    from relmerge.integrations.lightrag.instance import require_lightrag

    require_lightrag()
    if not os.environ.get("RELMERGE_DEBUG"):
        import lightrag.utils  # noqa: F401  (it sets its logger's level when imported)

        for name in ("lightrag", "nano-vectordb", "openai", "httpx"):
            logging.getLogger(name).setLevel(logging.WARNING)


@dataclass(frozen=True)
class _Dedupe:
    """Where a pass reads and writes, and what it reads (from the command line)."""

    working_dir: Path
    storage_config: Path | None
    out: Path
    documents: list[str]
    track_id: str | None
    wait_seconds: float
    redecide: bool

    async def run(
        self,
        config: DeduplicateRelationsConfig,
        settings: LLMSettings,
        embedding_settings: EmbeddingSettings,
        cache: bool,
        overwrite: bool,
        command: dict[str, Any] | None,
        console: Console,
    ) -> tuple[Any, bool]:
        """The pass over the opened instance; whether it re-embedded the edges."""
        from relmerge.integrations.lightrag import deduplicate
        from relmerge.integrations.lightrag.instance import check_embedding, opened

        quiet_lightrag()
        async with opened(self.working_dir, self.storage_config) as (rag, can_embed):
            if can_embed:
                await check_embedding(rag)
            with progress_view(console) as progress, _finish_hint(self.out):
                done = await deduplicate(
                    rag,
                    output=self.out,
                    documents=self.documents or None,
                    track_id=self.track_id,
                    config=config,
                    llm=settings,
                    embedding=embedding_settings,
                    cache=cache,
                    reembed=can_embed,
                    wait_seconds=self.wait_seconds,
                    overwrite=overwrite,
                    redecide=self.redecide,
                    progress=progress,
                    command=command,
                )
        return done, can_embed


@lightrag_group.command("undo", short_help="Take back the passes journalled in OUT.")
@click.argument("working_dir", type=click.Path(path_type=Path, file_okay=False))
@click.argument("out", metavar="OUT", type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--storage-config",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="The storage config the passes were made with (see `relmerge lightrag dedupe`).",
)
@click.option(
    "--quiet", "-q", is_flag=True, help="No progress bars or summary (stale vectors are said)."
)
def undo_command(working_dir: Path, out: Path, storage_config: Path | None, quiet: bool) -> None:
    """Take back every `relmerge lightrag dedupe` pass journalled in OUT, the newest
    first: each edge it changed gets its fields from before the pass back, plus what
    LightRAG added to it since (its new fragments and sources are kept), re-embedded
    with the instance's embedding (without one, its vectors are listed as stale).

    Exit status: 0 done; 2 bad usage, OUT holds no pass, or the instance cannot be
    opened; 130 / 143 interrupted (run the same command again to finish the undo)."""
    console = Console(stderr=True, quiet=quiet)
    try:
        taken, embedded = run_interruptible(_undo(working_dir, storage_config, out, console))
    except Interrupted as error:
        exit_interrupted(error, "interrupted — run the same command again to finish the undo")
    if not quiet:
        click.echo(
            f"relmerge lightrag undo {working_dir} ← {out}: "
            f"{plural(taken.passes, 'pass', 'passes')} taken back"
        )
        click.echo(f"  edges restored as they were: {taken.restored:,}")
        click.echo(f"  edges restored, keeping what LightRAG added since: {taken.rebased:,}")
        click.echo(f"  edges deleted since the pass (left alone): {len(taken.gone_edges):,}")
    _say_stale(taken.stale_edges, out, embedded)


async def _undo(
    working_dir: Path, storage_config: Path | None, out: Path, console: Console
) -> tuple[Any, bool]:
    from relmerge.integrations.lightrag import undo
    from relmerge.integrations.lightrag.instance import check_embedding, opened

    quiet_lightrag()
    async with opened(working_dir, storage_config) as (rag, can_embed):
        if can_embed:
            await check_embedding(rag)
        with progress_view(console) as progress, _finish_hint(out):
            taken = await undo(rag, out, reembed=can_embed, progress=progress)
    return taken, can_embed


@contextmanager
def _finish_hint(out: Path) -> Iterator[None]:
    """A provider's failure while the edges were being written says how to finish them:
    the journal keeps which are done, and the same command finishes the rest."""
    try:
        yield
    except ProviderError as error:
        from relmerge.integrations.lightrag import journal

        latest = journal.current(out)
        if latest is None or latest.state not in (journal.APPLYING, journal.UNDOING):
            raise
        raise ProviderError(
            f"{error} — some edges are written, the rest are not: run the same command "
            "again once it answers, and it finishes them",
            retryable=error.retryable,
        ) from None


def _say_documents(waiting: list[str], failed: list[str], unknown: list[str]) -> None:
    """The named documents the pass left out, and why."""
    for ids, why in (
        (waiting, "not processed by LightRAG yet: run the same command again once they are "
         "(or give --wait SECONDS)"),
        (failed, "failed in LightRAG: none of their edges was read"),
        (unknown, "unknown to LightRAG: check the ids"),
    ):  # fmt: skip
        if ids:
            shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
            click.echo(f"warning: {plural(len(ids), 'document')} {why} ({shown})", err=True)


def _say_gone(gone: list[tuple[str, str]]) -> None:
    if gone:
        click.echo(
            f"warning: {plural(len(gone), 'edge')} deleted from LightRAG meanwhile, left alone",
            err=True,
        )


def _say_stale(stale: list[tuple[str, str]], out: Path, embedded: bool) -> None:
    """The edges whose vectors still hold their old text, and the call that re-embeds
    them with the user's own LightRAG instance."""
    if not stale or embedded:
        return
    from relmerge.integrations.lightrag.journal import folder
    from relmerge.integrations.lightrag.passes import STALE_FILE, reembed_call

    path = (folder(out) / STALE_FILE).resolve()
    click.echo(
        f"warning: no embedding is configured, so the vectors of "
        f"{plural(len(stale), 'changed edge')} still hold their previous descriptions; "
        f"they are listed in {path}. Re-embed them with your LightRAG instance (in an async "
        "function, with `import json`):",
        err=True,
    )
    for line in reembed_call(str(path)).splitlines():
        click.echo(f"  {line}", err=True)
