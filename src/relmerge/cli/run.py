"""``relmerge run INPUT --output OUT``: deduplicate a batch of relations into OUT."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from relmerge.cache import CACHE_FILE, RunCache
from relmerge.cli.options import model_options, resolve_options
from relmerge.cli.render import RichProgress, summary_table
from relmerge.io.load import read_entities, read_entity_mapping, read_input
from relmerge.io.outdir import claim_output, fingerprint, remove_stale_relations
from relmerge.io.write import write_manifest
from relmerge.pipeline import plan, run_pipeline
from relmerge.providers import get_embedder, get_llm
from relmerge.review.memory import AnswerMemory
from relmerge.review.queue import MEMORY_FILE, ReviewQueue
from relmerge.stores.local import LocalStore

# Settings that change how a run goes, not what it outputs: a run killed with one value
# may be resumed with another.
_OPERATIONAL = {"concurrency", "api_key_env", "timeout", "max_retries", "requests_per_minute"}


def answer_memory(out: Path) -> AnswerMemory:
    """Answers a person gave in OUT (``relmerge review``), kept across runs.

    ``answer_memory.jsonl`` keeps every answer by pair content, so an answer still applies
    after the run that asked it has been replaced by newer runs.
    """
    return ReviewQueue(out).memory(into=AnswerMemory(out / MEMORY_FILE))


@click.command("run", short_help="Deduplicate a batch of relations into OUT.")
@click.argument("input_path", metavar="INPUT", type=click.Path(path_type=Path))
@click.option(
    "--output",
    "-o",
    "out",
    required=True,
    type=click.Path(path_type=Path),
    help="Output directory (created if missing).",
)
@click.option(
    "--entity-mapping",
    type=click.Path(path_type=Path),
    help="JSON object: old entity id -> canonical id (from entity dedup).",
)
@model_options
@click.option(
    "--semantic/--no-semantic", default=None, help="Run the semantic merge stage [default: on]."
)
@click.option("--concurrency", type=int, help="LLM requests in flight at once [8].")
@click.option(
    "--max-llm-requests",
    type=click.IntRange(min=0),
    help="Stop asking the LLM after this many requests; the rest is decided by the rules "
    "and the unsure policy, and recorded as issues.",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=0),
    help="Stop asking the LLM after this many tokens (prompt + completion), as above.",
)
@click.option(
    "--strict", is_flag=True, default=None, help="Fail (exit 2) if any input record is rejected."
)
@click.option(
    "--cache",
    "cache_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="SQLite file of LLM answers and embeddings, reused across runs "
    "[default: OUT/.relmerge/cache.sqlite].",
)
@click.option("--no-cache", is_flag=True, help="Neither read nor write a cache.")
@click.option(
    "--overwrite", is_flag=True, help="Replace a run in OUT made with other inputs or settings."
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Count records, groups, blocks and candidate pairs; embed, ask and write nothing.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bars or summary.")
def run_command(
    input_path: Path,
    out: Path,
    entity_mapping: Path | None,
    semantic: bool | None,
    concurrency: int | None,
    max_llm_requests: int | None,
    max_tokens: int | None,
    strict: bool | None,
    cache_path: Path | None,
    no_cache: bool,
    overwrite: bool,
    dry_run: bool,
    quiet: bool,
    **options: Any,
) -> None:
    """Deduplicate the relations in INPUT (JSONL file, directory of relation JSON files, or
    an object-store directory with relation_keys.json) and write the results to OUT."""
    config, settings, embedding_settings = resolve_options(
        options,
        {
            "semantic_merge": semantic,
            "concurrency": concurrency,
            "max_llm_requests": max_llm_requests,
            "max_tokens": max_tokens,
            "strict": strict,
        },
    )
    if dry_run:
        raws = asyncio.run(read_input(input_path))
        mapping = read_entity_mapping(entity_mapping) if entity_mapping else None
        counts = plan(raws, mapping)
        table = Table(title=f"relmerge run --dry-run: {input_path}", show_header=False)
        for key, value in counts.items():
            table.add_row(key.replace("_", " "), str(value))
        Console().print(table)
        return
    if no_cache and cache_path is not None:
        raise click.UsageError("--cache and --no-cache exclude each other")
    cache = None if no_cache else RunCache(cache_path or out / CACHE_FILE)
    llm = get_llm(settings)
    embedder = get_embedder(embedding_settings, cache) if config.semantic_merge else None
    entities = read_entities(options["entities_path"]) if options["entities_path"] else []
    raws = asyncio.run(read_input(input_path))
    # The batch lives until the process ends: keep the collector from rescanning it.
    gc.freeze()
    mapping = read_entity_mapping(entity_mapping) if entity_mapping else None
    console = Console(stderr=True, quiet=quiet)
    run_fingerprint = fingerprint(
        raws,
        mapping,
        config.model_dump(mode="json", exclude=_OPERATIONAL),
        settings.model_dump(mode="json", exclude=_OPERATIONAL),
        embedding_settings.model_dump(mode="json", exclude={"api_key_env"}),
        [entity.__dict__ for entity in entities],
    )

    memory = answer_memory(out)

    async def go() -> dict[str, Any]:
        store = LocalStore(out)

        async def claim() -> None:
            await claim_output(store, run_fingerprint, overwrite)

        with RichProgress(console) as progress:
            output = await run_pipeline(
                raws,
                mapping,
                config,
                llm,
                store,
                progress,
                embedder,
                entities,
                memory,
                before_work=claim,
                cache=cache,
            )
        output.result["fingerprint"] = run_fingerprint
        await remove_stale_relations(
            store, config.deduplicated_relations_prefix, output.relation_keys
        )
        await write_manifest(store, output.result, output.relation_keys, output.relation_id_mapping)
        return output.result

    try:
        result = asyncio.run(go())
    finally:
        if cache is not None:
            cache.close()
    if not quiet:
        Console().print(summary_table(result, str(out)))
