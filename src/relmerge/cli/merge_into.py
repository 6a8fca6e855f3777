"""``relmerge merge-into URL INPUT --output OUT``: deduplicate a batch against a relation
store (DESIGN §8; ``relmerge reconcile`` is in ``cli/reconcile.py``).

The store is checked before anything else (an unreachable URL or another schema
version: one line naming the URL, password hidden, exit 2, nothing written); OUT is
written as ``relmerge run`` writes it (relation files of the relations the batch
inserted or joined, the id mapping, decisions, clarifications, rejected records, the
result last). Answers given with ``relmerge review OUT`` apply when the same command runs
again: the earlier application of the batch is undone and the batch merged anew.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

import click
import orjson
from rich.console import Console

from relmerge.cache import CACHE_FILE, RunCache
from relmerge.cli.interrupt import Interrupted, exit_interrupted, run_interruptible
from relmerge.cli.notices import rejected_warning
from relmerge.cli.options import model_options, resolve_options
from relmerge.cli.progress_view import progress_view
from relmerge.cli.run import UNAVAILABLE_EXIT
from relmerge.config import DeduplicateRelationsConfig
from relmerge.graphstore import open_graph_store
from relmerge.io.load import read_entities, read_entity_mapping, stream_input
from relmerge.io.outdir import claim_output, remove_stale_relations
from relmerge.io.write import RESULT_FILE, jsonl, relation_key, write_files, write_manifest
from relmerge.progress import Progress
from relmerge.providers import get_embedder, get_llm, preflight
from relmerge.providers.use_embed import close_helpers
from relmerge.review import rerun
from relmerge.run.batch import answer_memory
from relmerge.run.store_merge import StoreMerge, StoreMergeOutput, StoreMergeResult
from relmerge.stores import LocalStore

_FIGURES = (
    ("input relations", "input_relation_count"),
    ("rejected records", "rejected_count"),
    ("already in the store", "already_folded_count"),
    ("new relations inserted", "inserted_count"),
    ("stored relations joined", "joined_count"),
    ("stored relations read", "stored_relations_read"),
    ("conflict retries", "conflict_retries"),
    ("clarifications", "clarification_count"),
    ("groups the LLM never answered", "llm_unavailable_group_count"),
    ("LLM requests", "llm_requests"),
)


@click.command("merge-into", short_help="Deduplicate a batch against a relation store.")
@click.argument("url", metavar="URL")
@click.argument("input_path", metavar="INPUT")
@click.option(
    "--output",
    "-o",
    "out",
    required=True,
    type=click.Path(path_type=Path),
    help="Output directory: the batch's relations, id mapping and logs.",
)
@click.option(
    "--entity-mapping",
    type=click.Path(path_type=Path),
    help="JSON object: old entity id -> canonical id (from entity dedup).",
)
@model_options
@click.option("--semantic/--no-semantic", default=None, help="Run the semantic stage [on].")
@click.option("--concurrency", type=int, help="LLM requests in flight at once [8].")
@click.option("--strict", is_flag=True, default=None, help="Fail if a record is rejected.")
@click.option(
    "--canaries",
    type=click.FloatRange(0.0, 1.0),
    metavar="SHARE",
    help="Canary questions, as a share of the LLM's questions, weighed by a sequential test "
    "kept in the store across batches; a model it stops stops merging, its pairs go to "
    "clarifications.jsonl and the command exits 3. 0 turns them off [0.05].",
)
@click.option("--no-cache", is_flag=True, help="Neither read nor write OUT's answer cache.")
@click.option("--overwrite", is_flag=True, help="Replace another batch's results in OUT.")
@click.option("--no-preflight", is_flag=True, help="Skip the endpoints' check.")
@click.option("--quiet", "-q", is_flag=True, help="No summary.")
# long: click passes each option as a parameter; the body resolves them and hands over.
def merge_into_command(
    url: str,
    input_path: str,
    out: Path,
    entity_mapping: Path | None,
    semantic: bool | None,
    concurrency: int | None,
    strict: bool | None,
    canaries: float | None,
    no_cache: bool,
    overwrite: bool,
    no_preflight: bool,
    quiet: bool,
    **options: Any,
) -> None:
    """Deduplicate the relations in INPUT against the relation store at URL: new against
    stored and new against new (never stored against stored), stored ids kept, the
    batch applied atomically and at most once. OUT gets what `relmerge run` writes.

    Exit status: 0 done; 2 bad usage, unreadable input, a store that cannot be reached
    or has another schema version (nothing written), answers that cannot apply because
    later batches built on this one (nothing changed); 3 applied without some of the
    LLM's merges: the model could not be reached for some groups (the same command run
    again asks them), or the sequential test on its canary answers, kept in the store
    across batches, stopped it, or its evidence so far favours a model to stop (its
    pairs are in clarifications.jsonl); 130 / 143
    interrupted (run the same command again: a batch is applied whole or not at all)."""
    config, settings, embedding_settings = resolve_options(
        options,
        {
            "semantic_merge": semantic,
            "concurrency": concurrency,
            "strict": strict,
            "canaries": canaries,
        },
    )
    cache = None if no_cache else RunCache(out / CACHE_FILE)
    typed = click.get_current_context().meta.get(rerun.ARGV_META)
    command = rerun.record(typed, os.getcwd()) if isinstance(typed, list) else None
    llm = get_llm(settings)
    embedder = get_embedder(embedding_settings, cache) if config.semantic_merge else None
    job = _MergeJob(url, input_path, out, entity_mapping, options["entities_path"], overwrite)
    console = Console(stderr=True, quiet=quiet)  # progress: bars on a terminal, else lines
    try:
        with progress_view(console) as progress:
            work = job.run(config, llm, embedder, cache, command, not no_preflight, progress)
            output = run_interruptible(work)
    except Interrupted as error:
        exit_interrupted(error)
    finally:
        if cache is not None:
            cache.close()
        close_helpers()
    if not quiet:
        shown = output.result
        click.echo(f"merge-into {shown.store_url}: batch {shown.batch_id} {shown.status}")
        for label, name in _FIGURES:
            if name == "llm_unavailable_group_count" and not shown.llm_unavailable_group_count:
                continue
            click.echo(f"  {label}: {getattr(shown, name)}{_aside(shown, name)}")
        if shown.entities_decided and not shown.entities_with_profile:
            entities = (
                "the batch's one entity has no profile"
                if shown.entities_decided == 1
                else f"none of the batch's {shown.entities_decided:,} entities has a profile"
            )
            click.echo(
                f"warning: {entities} (not in the store, no --entities): the LLM "
                "and review questions see names only; pass --entities FILE (entity "
                "profiles, JSONL)",
                err=True,
            )
        if shown.canaries.get("line"):
            click.echo(f"  canary questions (certain answers): {canary_line(shown.canaries)}")
        if shown.clarification_count:
            click.echo(
                f"Answer them: {shlex.join(['relmerge', 'review', str(out)])}; "
                "then run this command again."
            )
            if not llm.available:
                click.echo(
                    "Or merge the next batches too, then let an LLM decide them all at once: "
                    f"relmerge reconcile {shlex.quote(shown.store_url)} --pending --apply -o DIR "
                    "--llm-base-url …"
                )
        where = (
            f"set aside in {str(out).rstrip('/')}/{config.rejected_key}"
            if config.rejected_key
            else "not written (rejected_key is off)"
        )
        for line in rejected_warning(output.rejected, where):  # as `relmerge run` says it
            click.echo(line, err=True)
    measured = output.result.canaries
    if measured.get("reworked") or measured.get("distrusted"):
        click.echo(
            f"{measured['reason']}; its pairs are in clarifications.jsonl — check the model "
            "and its settings",
            err=True,
        )
        raise SystemExit(UNAVAILABLE_EXIT)
    unanswered = output.result.llm_unavailable_group_count
    if unanswered:
        groups = "group" if unanswered == 1 else "groups"
        click.echo(
            f"the LLM could not be reached for {unanswered} {groups}: the batch is in the "
            "store with the rules' decisions only, their pairs are in clarifications.jsonl; "
            "run the same command again once the model answers, and it asks them (or "
            f"`relmerge reconcile {shlex.quote(output.result.store_url)} --pending` does)",
            err=True,
        )
        raise SystemExit(UNAVAILABLE_EXIT)


class _MergeJob:
    """Where a merge reads and writes (from the command line)."""

    def __init__(
        self,
        url: str,
        input_path: str,
        out: Path,
        entity_mapping: Path | None,
        entities_path: Path | None,
        overwrite: bool,
    ) -> None:
        self.url = url
        self.input_path = input_path
        self.out = out
        self.entity_mapping = entity_mapping
        self.entities_path = entities_path
        self.overwrite = overwrite

    async def run(
        self,
        config: DeduplicateRelationsConfig,
        llm: Any,
        embedder: Any,
        cache: RunCache | None,
        command: dict[str, Any] | None,
        check: bool,
        progress: Progress | None = None,
    ) -> StoreMergeOutput:
        """Store first, endpoints, input; OUT claimed once the input is usable."""
        async with open_graph_store(self.url) as store:
            await store.info(last=0)  # unreachable or another schema version: exit 2 here
            if check:
                await preflight(llm)
                if embedder is not None:
                    await preflight(embedder)
            entities = read_entities(self.entities_path) if self.entities_path else []
            mapping = read_entity_mapping(self.entity_mapping) if self.entity_mapping else None
            records = await stream_input(self.input_path, {})
            folder = LocalStore(self.out)
            earlier = _earlier_batch(self.out)
            merge = StoreMerge(
                store,
                config,
                llm,
                embedder,
                entities=entities,
                memory=answer_memory(self.out),
                cache=cache,
            )

            async def claim(batch_id: str) -> None:
                fingerprint = f"{store.url} {merge.input_digest}"
                await claim_output(folder, fingerprint, self.overwrite, command)

            output = await merge.merge(
                records, mapping, before_work=claim, replaces=earlier, progress=progress
            )
        await _write_out(folder, config, output, f"{store.url} {merge.input_digest}")
        return output


def _aside(shown: StoreMergeResult, name: str) -> str:
    """What a bare count would leave a reader to guess."""
    if name == "already_folded_count" and shown.status == "already_applied":
        return " (this batch was applied before: nothing changed)"
    if name == "joined_count" and shown.joined_count:
        kept = shown.joined_count - shown.joined_changed_count
        return (
            f" ({shown.joined_changed_count} changed; {kept} already held what the batch "
            "brought: `store info` counts only the changed as updated)"
            if kept
            else ""
        )
    return ""


def canary_line(canaries: dict[str, Any]) -> str:
    """The model's canary answers in this store, its test's verdict, and this batch's."""
    return f"{canaries['line']} (over the store's batches; this batch: {canaries['asked']})"


def _earlier_batch(out: Path) -> str | None:
    """The batch OUT's result names (a merge of this input, maybe without later answers)."""
    try:
        result = orjson.loads((out / RESULT_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    batch_id = result.get("store", {}).get("batch_id") if isinstance(result, dict) else None
    return batch_id if isinstance(batch_id, str) else None


async def _write_out(
    folder: LocalStore,
    config: DeduplicateRelationsConfig,
    output: StoreMergeOutput,
    fingerprint: str,
) -> None:
    """The relation files, logs and manifest of the batch; the result file last."""
    prefix = config.deduplicated_relations_prefix
    files = [(relation_key(prefix, r.relation_id), r.to_json()) for r in output.relations]
    await write_files(folder, files)
    if config.decisions_key:
        await folder.put(config.decisions_key, jsonl(output.decisions))
    if config.clarifications_key:
        await folder.put(config.clarifications_key, jsonl(output.clarifications))
    if config.rejected_key:
        await folder.put(config.rejected_key, jsonl(r.to_dict() for r in output.rejected))
    keys = [key for key, _ in files]
    await remove_stale_relations(folder, prefix, keys)
    result = {
        "store": output.result.to_dict(),
        "issues": [issue.model_dump(mode="json") for issue in output.issues],
    }
    await write_manifest(folder, {"fingerprint": fingerprint, **result}, keys, output.mapping)
