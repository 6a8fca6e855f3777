"""``relmerge run INPUT --output OUT``: deduplicate a batch of relations into OUT."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import orjson
from rich.console import Console
from rich.table import Table

from relmerge.cache import CACHE_FILE, RunCache
from relmerge.cli.convert import program
from relmerge.cli.interrupt import Interrupted, exit_interrupted, run_interruptible
from relmerge.cli.left import DEMO_META, left_to_do, wrap_lines
from relmerge.cli.notices import huge_blocks_warning, rejected_warning
from relmerge.cli.options import model_options, resolve_options
from relmerge.cli.pipe import StdoutConsole
from relmerge.cli.progress_view import progress_view
from relmerge.cli.render import estimate_rows, summary_table
from relmerge.config import DeduplicateRelationsConfig, LLMSettings
from relmerge.engines.base import ChunkEngine
from relmerge.io.load import read_entities, read_entity_mapping, stream_input
from relmerge.io.records import Rejected
from relmerge.providers import get_embedder, get_llm
from relmerge.providers.use_embed import close_helpers
from relmerge.review import rerun
from relmerge.run.batch import Models, RunRequest, run_into_out
from relmerge.run.estimate import estimate
from relmerge.run.fingerprint import settings_models
from relmerge.run.plan import plan
from relmerge.run.result import RunResult
from relmerge.stores import local_path, open_store
from relmerge.stores.base import ObjectStore
from relmerge.stores.fsspec_store import redact_url

# Exit status of a run that completed while the LLM was unavailable for some groups.
UNAVAILABLE_EXIT = 3

_URL_LIKE = re.compile(r"^[A-Za-z][\w+.-]+:/")


def remote_cache_path(url: str) -> Path:
    """The default cache of an OUT given as a URL: SQLite needs a local file, so it lives
    in the user's cache directory, one file per OUT URL (a re-run into it resumes)."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    digest = hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:16]
    return root / "relmerge" / f"{digest}.sqlite"


def ray_engine(address: str | None) -> ChunkEngine:
    """The Ray engine, or a one-line usage error when Ray is not installed."""
    from relmerge.engines.ray_engine import RayEngine, import_ray
    from relmerge.errors import ConfigError

    try:
        import_ray()
    except ConfigError as error:
        raise click.UsageError(str(error)) from None
    return RayEngine(address)


def local_engine(workers: int | None) -> ChunkEngine | None:
    """``--workers``: None lets the run choose (``engines.local.default_engine``)."""
    if workers is None:
        return None
    if workers == 0:
        from relmerge.engines.local import LocalEngine

        return LocalEngine()
    from relmerge.engines.processes import ProcessEngine

    return ProcessEngine(workers)


_JSON_VALUE = re.compile(r"^(true|false|null|-?\d+(\.\d+)?|\{.*\}|\[.*\])$", re.DOTALL)


def parse_storage_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs for fsspec. true/false/null, numbers and JSON objects or arrays
    are read as JSON (``anon=true``, ``client_kwargs={"region_name": "eu-west-1"}``);
    anything else stays a string. Values are never echoed: they may be secrets."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(
                "expected KEY=VALUE (the value is not shown)", param_hint="--storage-option"
            )
        options[key.strip()] = value
        if _JSON_VALUE.match(value):
            with contextlib.suppress(orjson.JSONDecodeError):
                options[key.strip()] = orjson.loads(value)
    return options


@click.command("run", short_help="Deduplicate a batch of relations into OUT.")
@click.argument("input_path", metavar="INPUT")
@click.option(
    "--output",
    "-o",
    "out",
    required=True,
    metavar="OUT",
    help="Output directory (created if missing), or an object-store URL "
    "(s3://bucket/prefix, gs://…, any fsspec URL).",
)
@click.option(
    "--storage-option",
    "storage_option_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Option for the fsspec file system of a URL INPUT or OUT (endpoint_url=…, "
    "anon=true, profile=…); repeat for more. S3 also reads AWS_ACCESS_KEY_ID, "
    "AWS_SECRET_ACCESS_KEY, AWS_PROFILE and AWS_ENDPOINT_URL.",
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
    "[default: OUT/.relmerge/cache.sqlite; for a URL OUT, "
    "$XDG_CACHE_HOME/relmerge/<sha256 of the URL>.sqlite, ~/.cache by default].",
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
@click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Where the work runs: this process, or Ray workers that embed and decide "
    "whole chunks while this process reads, serves the LLM and writes "
    "(pip install relmerge[ray]).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=0),
    metavar="N",
    help="With --engine local: N worker processes work whole chunks side by side while "
    "this process reads, serves the LLM and writes; 0: everything in this process "
    "[default: one per CPU for a batch of several chunks (records_per_chunk) embedded by "
    "the default or hash model, else 0].",
)
@click.option(
    "--ray-address",
    metavar="ADDR",
    help="Ray cluster to join with --engine ray (ray://host:10001, host:6379 or auto) "
    "[default: $RAY_ADDRESS, else a local Ray on this machine's CPUs].",
)
@click.option(
    "--llm-breaker-groups",
    type=click.IntRange(min=1),
    metavar="N",
    help="After N groups in a row whose every attempt got no answer (refused, DNS, TLS, "
    "timeout, 5xx, dropped connection; invalid answers never count), stop sending: the "
    "groups left keep their records, their pairs go to clarifications.jsonl, and the run "
    "exits 3 [5].",
)
@click.option(
    "--canaries",
    type=click.FloatRange(0.0, 1.0),
    metavar="SHARE",
    help="Canary questions, as a share of the LLM's questions: pairs the rules decided "
    "on hard evidence, asked like any other; a model that a sequential test on its "
    "answers stops (canary_good_agreement, canary_bad_agreement, canary_false_stop, "
    "canary_false_trust) stops merging, its pairs go to clarifications.jsonl and the run "
    "exits 3. 0 turns them off [0.05].",
)
@click.option(
    "--no-preflight",
    is_flag=True,
    help="Skip the check of the endpoints before the run, e.g. for a re-run whose answers "
    "are all in the cache while the endpoint is down (what still needs an answer then "
    "fails group by group, and the run exits 3).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bars, summary or warnings.")
# long: click passes each option as a parameter (20 of them) and the docstring is --help;
# the body only resolves them and hands over to show_plan / run_into_out / say_what_is_left.
def run_command(
    input_path: str,
    out: str,
    storage_option_pairs: tuple[str, ...],
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
    engine: str,
    workers: int | None,
    ray_address: str | None,
    llm_breaker_groups: int | None,
    canaries: float | None,
    no_preflight: bool,
    quiet: bool,
    **options: Any,
) -> None:
    """Deduplicate the relations in INPUT (a JSONL, JSON-array or Parquet file, a directory
    of relation JSON files, or an object-store directory with relation_keys.json) and write
    the results to OUT. A GraphRAG or LightRAG folder goes through `relmerge import` first.

    INPUT and OUT may be object-store URLs (s3://bucket/prefix): INPUT a .jsonl object, a
    prefix holding relation_keys.json or a prefix of relation .json objects. Answers given
    with `relmerge review` are applied only when OUT is a local directory.

    Exit status: 0 done; 2 bad usage, unreadable input, or an endpoint that is not there or
    is not an LLM (one line says why, before any work); 3 done, but the LLM was unavailable
    for some groups (run the same command again to ask them); 130 / 143 interrupted by
    Ctrl-C / SIGTERM (run the same command again to resume)."""
    config, settings, embedding_settings = resolve_options(
        options,
        {
            "semantic_merge": semantic,
            "concurrency": concurrency,
            "max_llm_requests": max_llm_requests,
            "max_tokens": max_tokens,
            "strict": strict,
            "llm_breaker_groups": llm_breaker_groups,
            "canaries": canaries,
        },
    )
    storage_options = parse_storage_options(storage_option_pairs)
    if dry_run:
        show_plan(
            input_path,
            out,
            storage_options,
            entity_mapping,
            config,
            settings,
            options["entities_path"],
        )
        return
    refuse_usage(no_cache, cache_path, engine, workers, ray_address)
    chunk_engine = ray_engine(ray_address) if engine == "ray" else local_engine(workers)
    out_dir = local_path(out)  # None: OUT is in an object store
    default_cache = out_dir / CACHE_FILE if out_dir is not None else remote_cache_path(out)
    cache = None if no_cache else RunCache(cache_path or default_cache)
    store = open_store(out, **storage_options)
    models = Models(
        get_llm(settings),
        get_embedder(embedding_settings, cache) if config.semantic_merge else None,
        settings_models(settings, embedding_settings),
        (settings.price_in, settings.price_out),
    )
    console = Console(stderr=True, quiet=quiet)  # progress: bars on a terminal, else lines
    typed = click.get_current_context().meta.get(rerun.ARGV_META)  # for `relmerge review`
    request = RunRequest(
        input_path,
        out,
        out_dir,
        storage_options,
        entity_mapping,
        options["entities_path"],
        overwrite,
        not no_preflight,
        rerun.record(typed, os.getcwd()) if isinstance(typed, list) else None,
    )
    try:
        result, rejected = run_interruptible(
            _run_with_progress(request, store, config, models, cache, chunk_engine, console)
        )
    except Interrupted as error:
        if cache is not None:
            cache.close()
        exit_interrupted(error)
    finally:
        if cache is not None:
            cache.close()
        close_helpers()
    say_what_is_left(result, rejected, request, config, quiet, cached=cache is not None)


def show_plan(
    input_path: str,
    out: str,
    storage_options: dict[str, Any],
    entity_mapping: Path | None,
    config: DeduplicateRelationsConfig,
    settings: LLMSettings,
    entities_path: Path | None = None,
) -> None:
    """``--dry-run``: the counts of the work, an estimate of the LLM requests and tokens
    (with a model), and the warnings a run would give."""
    raws = asyncio.run(stream_input(input_path, storage_options))
    mapping = read_entity_mapping(entity_mapping) if entity_mapping else None
    planned = plan(
        raws, mapping, config.records_per_chunk, description_chars=config.prompt_description_chars
    )
    title = f"relmerge run --dry-run: {redact_url(input_path)}"
    table = Table(title=title, show_header=False)
    for key, value in planned.counts.items():
        table.add_row(key.replace("_", " "), str(value))
    if settings.provider != "none":
        entities = read_entities(entities_path) if entities_path else []
        prices = (settings.price_in, settings.price_out)
        for label, shown in estimate_rows(estimate(planned, config, entities, prices)):
            table.add_row(label, shown)
    StdoutConsole().print(table)
    where = f"a run would set them aside in {redact_url(out).rstrip('/')}/{config.rejected_key}"
    lines = rejected_warning(planned.rejected, where)
    lines += huge_blocks_warning(planned, config, settings.provider != "none")
    for line in lines:
        click.echo(line, err=True)


def refuse_usage(
    no_cache: bool,
    cache_path: Path | None,
    engine: str,
    workers: int | None,
    ray_address: str | None,
) -> None:
    """The options that exclude each other, as one-line usage errors."""
    if no_cache and cache_path is not None:
        raise click.UsageError("--cache and --no-cache exclude each other")
    if cache_path is not None and _URL_LIKE.match(str(cache_path)):
        # click's Path has already turned s3://b/c into "s3:/b/c", a local file to be.
        raise click.UsageError("--cache must be a local file (SQLite), not a URL")
    if ray_address is not None and engine != "ray":
        raise click.UsageError("--ray-address needs --engine ray")
    if workers is not None and engine != "local":
        raise click.UsageError("--workers is for --engine local (Ray has its own workers)")


async def _run_with_progress(
    request: RunRequest,
    store: ObjectStore,
    config: DeduplicateRelationsConfig,
    models: Models,
    cache: RunCache | None,
    engine: ChunkEngine | None,
    console: Console,
) -> tuple[RunResult, list[Rejected]]:
    with progress_view(console) as progress:
        return await run_into_out(request, store, config, models, cache, engine, progress)


def say_what_is_left(
    result: RunResult,
    rejected: list[Rejected],
    request: RunRequest,
    config: DeduplicateRelationsConfig,
    quiet: bool,
    cached: bool,
) -> None:
    """The summary, the rejected records, what the run left undecided and the ways on;
    exit 3 when the LLM was unavailable for some groups."""
    shown = redact_url(request.out)
    if not quiet:
        StdoutConsole().print(summary_table(result, shown))
    where = (
        f"set aside in {shown.rstrip('/')}/{config.rejected_key}"
        if config.rejected_key
        else "not written (rejected_key is off)"
    )
    for line in [] if quiet else rejected_warning(rejected, where):
        click.echo(line, err=True)
    if not quiet:
        meta = click.get_current_context().meta
        reviewable = request.out_dir is not None
        demo = bool(meta.get(DEMO_META))
        left = left_to_do(
            result, shown, program(), meta.get(rerun.ARGV_META), reviewable, ways_on=not demo
        )
        for line in wrap_lines(left) if demo else left:
            click.echo(line)
    unavailable = result.llm_unavailable_group_count
    if result.canaries.distrusted:
        click.echo(
            f"{result.canaries.reason}; its pairs are in clarifications.jsonl — check the "
            "model and its settings",
            err=True,
        )
        raise SystemExit(UNAVAILABLE_EXIT)
    if unavailable:
        kept = "answers so far are cached" if cached else "--no-cache: none was kept"
        groups = "group" if unavailable == 1 else "groups"
        click.echo(
            f"completed, but the LLM was unavailable for {unavailable} {groups} — run the "
            f"same command again to ask them; {kept}",
            err=True,
        )
        raise SystemExit(UNAVAILABLE_EXIT)
