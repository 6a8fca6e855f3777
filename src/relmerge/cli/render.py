"""Terminal rendering for the CLI: rich progress bars on stderr, a summary table."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

_LABELS = {
    "load": "reading input: records",
    "exact": "exact stage: groups",
    "semantic": "semantic stage: blocks",
    "write": "writing relations",
}


class RichProgress:
    """Implements :class:`relmerge.progress.Progress` with one bar per stage."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def start(self, stage: str, total: int | None) -> None:
        self._tasks[stage] = self._progress.add_task(_LABELS.get(stage, stage), total=total)

    def advance(self, stage: str, amount: int = 1) -> None:
        if stage in self._tasks:
            self._progress.advance(self._tasks[stage], amount)

    def finish(self, stage: str) -> None:
        if stage in self._tasks:
            self._progress.remove_task(self._tasks.pop(stage))


def summary_table(result: dict[str, Any], out: str) -> Table:
    table = Table(title=f"relmerge run → {out}", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    rows = [
        ("input records", result["input_record_count"]),
        ("rejected (see rejected.jsonl)", result["rejected_count"]),
        ("valid input relations", result["input_relation_count"]),
        ("output relations", result["output_relation_count"]),
        ("merged by exact stage", result["exact_merge_count"]),
        ("merged by semantic stage", result["semantic_merge_count"]),
        (
            "rounds (exact / semantic)",
            f"{result['exact_round_count']} / {result['semantic_round_count']}",
        ),
        ("exact groups needing an LLM (none configured)", result["llm_needed_group_count"]),
        ("pairs needing an LLM, no valid verdict (→ review)", result["llm_needed_pair_count"]),
        ("unsure → clarifications.jsonl", result["clarification_count"]),
        ("failed groups (originals kept)", result["failed_group_count"]),
        (
            "groups left for a re-run: LLM unavailable",
            result["llm_unavailable_group_count"],
        ),
        ("endpoint checks before the run (preflight requests)", result["preflight_requests"]),
        ("LLM requests sent", result["llm_requests"]),
        ("LLM requests that failed (HTTP; retried)", result["llm_failed_requests"]),
        ("LLM answers that were invalid (retried)", result["llm_invalid_answers"]),
        ("LLM answers from the cache", result["llm_cache_hits"]),
        ("tokens", result["tokens"]["total"]),
        ("seconds", result["seconds"]["total"]),
    ]
    for label, value in rows:
        table.add_row(label, str(value))
    codes = Counter(issue["code"] for issue in result["issues"])
    for code, count in sorted(codes.items()):
        table.add_row(f"issue: {code}", str(count))
    return table
