"""How a question looks in the terminal: entities, profiles, records, scores, reason."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text


def question_panel(
    question: dict[str, Any], position: int, total: int, left: int, current: str | None = None
) -> Panel:
    """One question; ``current``: the answer it has now (``relmerge review --revise``)."""
    parts: list[Any] = []
    for entity in question.get("context", {}).get("entities", []):
        line = Text.assemble((entity["name"], "bold"), f"  ({entity['entity_id']})")
        if entity.get("profile"):
            line.append(f"\n  {entity['profile']}", style="dim")
        parts.append(line)
    table = Table(show_lines=True, expand=True)
    for column in ("relation", "source → target", "name / type", "description", "attributes"):
        table.add_column(column, overflow="fold")
    for record in question["records"]:
        attributes = ", ".join(f"{k}={v}" for k, v in record.get("attributes", {}).items())
        table.add_row(
            record["relation_id"],
            f"{record['source_entity_name']} → {record['target_entity_name']}",
            f"{record['name']}\n[dim]{record['type']}[/dim]",
            record["description"],
            attributes,
        )
    parts.append(table)
    scores = question.get("scores") or {}
    if scores:
        parts.append(Text("scores: " + ", ".join(f"{k} {v}" for k, v in scores.items())))
    if question.get("reason"):
        parts.append(Text(f"why asked: {question['reason']}", style="italic"))
    if current is not None:
        parts.append(Text(f"current answer: {current}", style="bold"))
    else:
        policy = question.get("policy_decision", "keep_both")
        parts.append(Text(f"without an answer: {policy}", style="dim"))
    title = f"question {position} of {total} — {left} left"
    return Panel(Group(*parts), title=title, subtitle=f"same fact?  ({question['id']})")
