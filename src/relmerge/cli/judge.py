"""``relmerge judge``: one candidate relation against existing ones, from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import orjson

from relmerge.cli.interrupt import Interrupted, exit_interrupted, run_interruptible
from relmerge.cli.options import model_options, resolve_options
from relmerge.cli.pipe import StdoutConsole
from relmerge.cli.render import cost_lines
from relmerge.cli.run import UNAVAILABLE_EXIT
from relmerge.errors import InputError
from relmerge.io.load import read_entities, read_entity_mapping
from relmerge.judge import JudgeContext, RelationJudge, RelationLike, Verdict
from relmerge.providers import get_embedder, get_llm
from relmerge.run.cost import Cost, cost_of
from relmerge.stages.remap import validate_entity_mapping


def _parse(value: str, what: str) -> Any:
    text = value.strip()
    if text.startswith(("{", "[")):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError as error:
            raise InputError(f"{what} looks like JSON but is not valid: {error}") from None
    return text


def _existing(values: tuple[str, ...]) -> list[RelationLike]:
    relations: list[RelationLike] = []
    for value in values:
        parsed = _parse(value, "--existing")
        relations.extend(parsed if isinstance(parsed, list) else [parsed])
    return relations


def _remap(relation: RelationLike, mapping: dict[str, str]) -> RelationLike:
    if not isinstance(relation, dict):
        return relation
    return {
        **relation,
        **{
            key: mapping.get(relation[key], relation[key])
            for key in ("source_entity_id", "target_entity_id")
            if isinstance(relation.get(key), str)
        },
    }


@click.command("judge", short_help="Check one candidate relation against existing ones.")
@click.option("--candidate", required=True, help="The new relation: JSON object or plain text.")
@click.option(
    "--existing",
    multiple=True,
    required=True,
    help="An existing relation (JSON object or text), or a JSON array of them; repeatable.",
)
@click.option("--source-name", help="Name of the source entity.")
@click.option("--target-name", help="Name of the target entity.")
@click.option("--source-profile", help="Profile (background, arc) of the source entity.")
@click.option("--target-profile", help="Profile of the target entity.")
@click.option(
    "--entity-mapping",
    type=click.Path(path_type=Path),
    help="JSON object: old entity id -> canonical id, applied to relation endpoints.",
)
@model_options
@click.option("--json", "as_json", is_flag=True, help="Print the verdict object as JSON.")
def judge_command(
    candidate: str,
    existing: tuple[str, ...],
    source_name: str | None,
    target_name: str | None,
    source_profile: str | None,
    target_profile: str | None,
    entity_mapping: Path | None,
    as_json: bool,
    **options: Any,
) -> None:
    """Is CANDIDATE the same fact as one of the EXISTING relations of the same two entities?
    Prints the decision (merge / keep_both), the tier that decided, the scores and why, and
    the tokens the LLM spent (in USD with --llm-price-in/--llm-price-out).

    Exit status: 0 decided; 2 bad usage or input, or an endpoint that is not there or is
    not an LLM (checked before any work); 3 decided without the LLM because it stopped
    answering during the check (the verdict says so); 130 interrupted."""
    config, settings, embedding_settings = resolve_options(options, {})
    mapping = validate_entity_mapping(
        read_entity_mapping(entity_mapping) if entity_mapping else None
    )
    new = _remap(_parse(candidate, "--candidate"), mapping)
    olds = [_remap(item, mapping) for item in _existing(existing)]
    anchor = new if isinstance(new, dict) else {}
    source_id = str(anchor.get("source_entity_id", "source"))
    target_id = str(anchor.get("target_entity_id", "target"))
    profiles = {}
    if options.get("entities_path"):
        profiles = {
            mapping.get(e.entity_id, e.entity_id): e
            for e in read_entities(options["entities_path"])
        }
    source, target = profiles.get(source_id), profiles.get(target_id)
    context = JudgeContext(
        source_name=source_name
        or (source.name if source else anchor.get("source_entity_name", "A")),
        target_name=target_name
        or (target.name if target else anchor.get("target_entity_name", "B")),
        source_profile=source_profile or (source.profile if source else None),
        target_profile=target_profile or (target.profile if target else None),
        source_id=source_id,
        target_id=target_id,
    )
    llm, embedder = get_llm(settings), get_embedder(embedding_settings)

    async def go() -> tuple[Verdict, int, RelationJudge]:
        judge = RelationJudge(llm=llm, embedder=embedder, config=config)
        checked = await judge.preflight()  # before any work, not before the first question
        return await judge.check(new, olds, context), checked, judge

    try:
        verdict, checked, judge = run_interruptible(go(), "interrupted")
    except Interrupted as error:
        exit_interrupted(error, "interrupted")
    stats = judge.llm.stats
    cost = cost_of(stats).priced(settings.price_in, settings.price_out)
    if as_json:
        shown = {
            **verdict.model_dump(mode="json"),
            "preflight_requests": checked,
            "tokens": stats.tokens(),
            "cost": cost.to_dict(),
        }
        click.echo(orjson.dumps(shown, option=orjson.OPT_INDENT_2))
    else:
        _show(verdict, checked, cost, stats.tokens()["total"])
    if verdict.llm_outcome == "unavailable":
        click.echo(
            "decided without the LLM: it stopped answering — check the endpoint and run "
            "the same command again",
            err=True,
        )
        raise SystemExit(UNAVAILABLE_EXIT)


def _show(verdict: Verdict, checked: int, cost: Cost, tokens: int) -> None:
    console = StdoutConsole()
    style = "bold green" if verdict.decision == "merge" else "bold yellow"
    console.print(f"[{style}]{verdict.decision}[/{style}]  (tier {verdict.tier})")
    if verdict.matched_relation_id:
        console.print(f"duplicate of: {verdict.matched_relation_id}")
    console.print("scores: " + ", ".join(f"{k} {v}" for k, v in verdict.scores.items()))
    console.print(f"why: {verdict.reason}", markup=False)
    console.print(f"LLM requests: {verdict.llm_requests}")
    if checked:
        console.print(f"preflight requests (endpoint checks): {checked}")
    for label, value in cost_lines(cost, tokens):
        console.print(f"{label}: {value}", markup=False)
