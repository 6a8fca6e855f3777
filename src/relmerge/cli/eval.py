"""``relmerge eval OUT --gold GOLD.jsonl``: score a run's id mapping against gold clusters."""

from __future__ import annotations

from pathlib import Path

import click
import orjson
from rich.table import Table

from relmerge.cli.pipe import StdoutConsole
from relmerge.errors import InputError
from relmerge.eval.gold import load_gold
from relmerge.eval.metrics import evaluate
from relmerge.io.load import read_json_file
from relmerge.io.write import MAPPING_FILE, RESULT_FILE


@click.command("eval")
@click.argument("out", type=click.Path(path_type=Path))
@click.option(
    "--gold",
    "gold_path",
    required=True,
    type=click.Path(path_type=Path),
    help="JSONL of {relation_id, cluster}.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as one JSON object.")
def eval_command(out: Path, gold_path: Path, as_json: bool) -> None:
    """Pairwise and B-cubed precision/recall/F1 of the run in OUT against GOLD."""
    mapping_path = out / MAPPING_FILE if out.is_dir() else out
    mapping = read_json_file(mapping_path, "relation id mapping")
    if not isinstance(mapping, dict):
        raise InputError(f"{mapping_path} must be a JSON object of input id -> output id")
    report = evaluate(mapping, load_gold(gold_path)).to_dict()
    result_path = out / RESULT_FILE
    if out.is_dir() and result_path.is_file():
        result = orjson.loads(result_path.read_bytes())
        report["llm_requests"] = result.get("llm_requests")
        report["output_relation_count"] = result.get("output_relation_count")
    if as_json:
        click.echo(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    table = Table(title=f"relmerge eval: {out}", show_header=True)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in report.items():
        table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
    StdoutConsole().print(table)
