"""``relmerge graphiti dedupe URL --group-id G --output OUT`` and ``relmerge graphiti undo
URL OUT``: a deduplication pass over a Graphiti group in place, through graphiti-core
(``relmerge.integrations.graphiti``), and its undo.

The graph is opened from its URL (``integrations.graphiti.connect``: FalkorDB, Kuzu,
Neo4j). OUT is a run as ``relmerge run`` writes it, plus the pass's journal: ``relmerge
review OUT`` answers its questions and re-runs the command, and the same command run again
after an interruption finishes the pass.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from relmerge.cli.apply_step import plural
from relmerge.cli.interrupt import Interrupted, exit_interrupted, run_interruptible
from relmerge.cli.options import pass_options, resolve_options
from relmerge.cli.progress_view import progress_view
from relmerge.cli.run import say_what_is_left
from relmerge.config import DeduplicateRelationsConfig, EmbeddingSettings, LLMSettings
from relmerge.errors import InputError, ProviderError
from relmerge.integrations.graphiti.connect import GraphEmbedding, check_url, shown
from relmerge.providers.use_embed import close_helpers
from relmerge.review import rerun
from relmerge.run.batch import RunRequest

F = TypeVar("F", bound=Callable[..., Any])


def graph_embedding_options(function: F) -> F:
    """The options naming the graph's own embedder (Graphiti's ``OpenAIEmbedder``)."""
    for option in reversed(
        [
            click.option(
                "--graph-embedding-base-url",
                metavar="URL",
                help="OpenAI-compatible base URL (…/v1) of the embeddings the graph was "
                "built with; the changed edges are re-embedded there [default: none: their "
                "vectors are listed as stale, with the call that re-embeds them].",
            ),
            click.option(
                "--graph-embedding-model",
                metavar="NAME",
                help="The graph's embedding model [text-embedding-3-small, Graphiti's "
                "default, when a base URL is given].",
            ),
            click.option(
                "--graph-embedding-api-key-env",
                metavar="VAR",
                help="Environment variable holding the embeddings' key [OPENAI_API_KEY; a "
                "base URL without one gets none].",
            ),
            click.option(
                "--graph-embedding-dim",
                type=click.IntRange(min=1),
                metavar="N",
                help="Cut vectors to N numbers, as the graph's Graphiti did [its "
                "EMBEDDING_DIM, 1024 unless set].",
            ),
        ]
    ):
        function = option(function)
    return function


@click.group("graphiti", short_help="Deduplicate the edges of a Graphiti graph in place.")
def graphiti_group() -> None:
    """Deduplicate the RELATES_TO edges of a Graphiti group in place, through
    graphiti-core's own classes (FalkorDB, Kuzu, Neo4j), and undo it. The survivor keeps
    its uuid, gets every wording and the union of the episodes; the duplicates are deleted
    (or expired). Needs graphiti-core (pip install relmerge[graphiti]).

    URL is the graph: falkordb://host:port (falkordbs:// for TLS), kuzu:///path/to/db, or
    neo4j://host:port[/database] (bolt://, neo4j+s://; not tested here). Credentials come
    from the URL (user:password@) or the environment: FALKORDB_USERNAME /
    FALKORDB_PASSWORD, NEO4J_USER / NEO4J_PASSWORD; they are never printed."""


@graphiti_group.command("dedupe", short_help="Deduplicate a Graphiti group's edges.")
@click.argument("url", metavar="URL")
@click.option("--group-id", "-g", required=True, help="The Graphiti group to deduplicate.")
@click.option(
    "--output",
    "-o",
    "out",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Output directory: the run (as `relmerge run` writes it) and the pass's journal "
    "(graphiti/journal.json), which `relmerge graphiti undo` reads.",
)
@graph_embedding_options
@click.option(
    "--expire",
    is_flag=True,
    help="Set expired_at on the absorbed edges instead of deleting them (Graphiti's search "
    "still returns expired edges unless filtered).",
)
@pass_options
@click.option(
    "--quiet",
    "-q",
    is_flag=True,
    help="No progress bars or summary (stale vectors are still said).",
)
# long: click passes each option as a parameter; the body resolves them and hands over.
def dedupe_command(
    url: str,
    group_id: str,
    out: Path,
    graph_embedding_base_url: str | None,
    graph_embedding_model: str | None,
    graph_embedding_api_key_env: str | None,
    graph_embedding_dim: int | None,
    expire: bool,
    semantic: bool | None,
    concurrency: int | None,
    max_llm_requests: int | None,
    canaries: float | None,
    cache: bool,
    overwrite: bool,
    quiet: bool,
    **options: Any,
) -> None:
    """Deduplicate the edges of Graphiti group GROUP_ID in the graph at URL: the edges
    between the same two entities that state the same fact become one, through
    graphiti-core. The survivor (the oldest) keeps its uuid, its fact becomes every
    wording, its episodes the union, and it is re-embedded with the graph's embeddings
    (--graph-embedding-*; without them its vector is listed as stale); the others are
    deleted (--expire: expired), and the episodes name the survivor instead. An
    invalidated edge is never merged with a valid one. OUT keeps the run and a journal:
    `relmerge review OUT` answers what the rules left undecided and re-runs this command;
    `relmerge graphiti undo URL OUT` takes the pass back.

    URL: falkordb://host:port, kuzu:///path/to/db, neo4j://host:port (more in `relmerge
    graphiti --help`); credentials from the URL or the environment, never printed.

    Exit status: 0 done; 2 bad usage, an unknown URL scheme, a graph that cannot be opened,
    or an embeddings endpoint that is not there (one line says why); 3 done, but the LLM
    was unavailable for some groups, or its canary answers stopped it (run the same
    command again); 130 / 143 interrupted (run the same command again: it finishes the
    pass)."""
    check_url(url)
    if options.get("entities_path") is not None:
        raise click.UsageError("--entities is not for Graphiti: its entities come from the graph")
    config, settings, embedding_settings = resolve_options(
        options,
        {
            "semantic_merge": semantic,
            "concurrency": concurrency,
            "max_llm_requests": max_llm_requests,
            "canaries": canaries,
        },
    )
    graph_embedding = GraphEmbedding(
        graph_embedding_base_url,
        graph_embedding_model,
        graph_embedding_api_key_env,
        graph_embedding_dim,
    )
    typed = click.get_current_context().meta.get(rerun.ARGV_META)  # for `relmerge review`
    command = rerun.record(typed, os.getcwd()) if isinstance(typed, list) else None
    console = Console(stderr=True, quiet=quiet)
    job = _Dedupe(url, group_id, out, graph_embedding, expire, overwrite)
    try:
        done, embedded = run_interruptible(
            job.run(config, settings, embedding_settings, cache, command, console)
        )
    except Interrupted as error:
        exit_interrupted(error)
    finally:
        close_helpers()
    if not quiet:
        _say_pass(done, url, out)
    if not done.resumed and done.edges_read == 0:
        click.echo(
            f"warning: group {group_id!r} has no edges in {shown(url)}: check --group-id",
            err=True,
        )
    try:
        if done.run is not None:
            request = RunRequest(
                shown(url), str(out), out, {}, None, None, overwrite, True, command
            )
            say_what_is_left(done.run, [], request, config, quiet, cached=cache)
    finally:
        _say_gone(done.gone_edges)
        _say_stale(done.stale_edges, out, embedded)


def _say_pass(done: Any, url: str, out: Path) -> None:
    click.echo(f"relmerge graphiti dedupe {shown(url)} (group {done.group_id}) → {out}")
    if done.resumed:
        click.echo(f"  finished the interrupted pass: {plural(len(done.absorbed), 'edge')} merged")
        return
    click.echo(
        f"  edges read: {done.edges_read:,}"
        + (f" ({done.edges_expired:,} expired, left out)" if done.edges_expired else "")
    )
    verb = "expired" if done.expire else "deleted"
    click.echo(f"  edges merged into a survivor ({verb}): {len(done.absorbed):,}")
    click.echo(f"  survivors rewritten: {len(done.survivors):,}")
    click.echo(f"  episodes rewritten: {done.episodes_changed:,}")
    if done.splits:
        click.echo(
            f"  kept apart for their validity (invalid_at): {plural(len(done.splits), 'cluster')}"
        )


@dataclass(frozen=True)
class _Dedupe:
    """Where a pass reads and writes (from the command line)."""

    url: str
    group_id: str
    out: Path
    embedding: GraphEmbedding
    expire: bool
    overwrite: bool

    async def run(
        self,
        config: DeduplicateRelationsConfig,
        settings: LLMSettings,
        embedding_settings: EmbeddingSettings,
        cache: bool,
        command: dict[str, Any] | None,
        console: Console,
    ) -> tuple[Any, bool]:
        """The pass over the opened graph; whether it re-embedded the survivors."""
        from relmerge.integrations.graphiti import deduplicate
        from relmerge.integrations.graphiti.connect import check_embedder, graph_embedder, opened

        embedder = graph_embedder(self.embedding)
        async with opened(self.url, self.group_id) as driver:
            if embedder is not None:
                await check_embedder(embedder, self.embedding)
            with progress_view(console) as progress, _provider_errors(self.out):
                done = await deduplicate(
                    driver,
                    group_id=self.group_id,
                    output=self.out,
                    embedder=embedder,
                    config=config,
                    llm=settings,
                    embedding=embedding_settings,
                    cache=cache,
                    expire=self.expire,
                    overwrite=self.overwrite,
                    progress=progress,
                    command=command,
                )
        return done, embedder is not None


@graphiti_group.command("undo", short_help="Take back the passes journalled in OUT.")
@click.argument("url", metavar="URL")
@click.argument("out", metavar="OUT", type=click.Path(path_type=Path, file_okay=False))
@graph_embedding_options
@click.option("--quiet", "-q", is_flag=True, help="No progress bars or summary.")
def undo_command(
    url: str,
    out: Path,
    graph_embedding_base_url: str | None,
    graph_embedding_model: str | None,
    graph_embedding_api_key_env: str | None,
    graph_embedding_dim: int | None,
    quiet: bool,
) -> None:
    """Take back every `relmerge graphiti dedupe` pass journalled in OUT, the newest
    first: each edge it changed gets its fields from before the pass back (a deleted one
    is recreated, its vector included), each episode its edge list (plus the edges
    Graphiti added to it since). The graph's embeddings (--graph-embedding-*) only embed a
    restored edge that had no vector.

    Exit status: 0 done; 2 bad usage, OUT holds no pass, or the graph cannot be opened;
    130 / 143 interrupted (run the same command again to finish the undo)."""
    check_url(url)
    embedding = GraphEmbedding(
        graph_embedding_base_url,
        graph_embedding_model,
        graph_embedding_api_key_env,
        graph_embedding_dim,
    )
    console = Console(stderr=True, quiet=quiet)
    try:
        taken = run_interruptible(_undo(url, out, embedding, console))
    except Interrupted as error:
        exit_interrupted(error, "interrupted — run the same command again to finish the undo")
    if not quiet:
        click.echo(
            f"relmerge graphiti undo {shown(url)} ← {out}: "
            f"{plural(taken.passes, 'pass', 'passes')} taken back"
        )
        click.echo(f"  edges restored: {taken.edges_restored:,}")
        click.echo(f"  episodes restored: {taken.episodes_restored:,}")
    if taken.gone_edges:
        click.echo(
            f"warning: {plural(len(taken.gone_edges), 'episode')} deleted from the graph "
            "since the pass, left alone",
            err=True,
        )


async def _undo(url: str, out: Path, embedding: GraphEmbedding, console: Console) -> Any:
    from relmerge.integrations.graphiti import journal, undo
    from relmerge.integrations.graphiti.connect import check_embedder, graph_embedder, opened

    latest = journal.current(out)
    if latest is None:
        raise InputError(
            f"{out} holds no Graphiti pass to undo (no {journal.FOLDER}/{journal.JOURNAL})"
        )
    embedder = graph_embedder(embedding)
    async with opened(url, str(latest.info.get("group_id"))) as driver:
        if embedder is not None:
            await check_embedder(embedder, embedding)
        with progress_view(console) as progress, _provider_errors(out):
            return await undo(driver, out, embedder=embedder, progress=progress)


@contextmanager
def _provider_errors(out: Path) -> Iterator[None]:
    """The graph's embeddings failing mid-pass (an ``openai`` error) is one line, and
    says how to finish: the journal keeps which writes are done."""
    try:
        yield
    except Exception as error:
        try:
            import openai
        except ImportError:
            raise error from None
        if not isinstance(error, openai.OpenAIError):
            raise
        reason = " ".join(str(error).split())[:300]
        raise ProviderError(
            f"the graph's embeddings failed: {reason} — run the same command again once "
            f"they answer (OUT {out} keeps what is done)",
            retryable=True,
        ) from None


def _say_gone(gone: list[str]) -> None:
    if gone:
        click.echo(
            f"warning: {plural(len(gone), 'edge')} deleted from the graph meanwhile, left alone",
            err=True,
        )


def _say_stale(stale: list[str], out: Path, embedded: bool) -> None:
    """The survivors whose vectors still embed their old facts, and the call that
    re-embeds them with the user's own graphiti driver and embedder."""
    if not stale or embedded:
        return
    from relmerge.integrations.graphiti.journal import folder
    from relmerge.integrations.graphiti.passes import STALE_FILE, reembed_call

    path = (folder(out) / STALE_FILE).resolve()
    click.echo(
        f"warning: no graph embedding is configured (--graph-embedding-base-url), so the "
        f"vectors of {plural(len(stale), 'changed edge')} still embed their previous facts; "
        f"they are listed in {path}. Re-embed them with your Graphiti driver and embedder "
        "(in an async function, with `import json`):",
        err=True,
    )
    for line in reembed_call(str(path)).splitlines():
        click.echo(f"  {line}", err=True)
