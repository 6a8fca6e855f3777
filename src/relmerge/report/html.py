"""The report page: one self-contained HTML file (inline CSS and SVG, no script, no URL).

Relation text, ids, names, reasons and messages come from extracted data and are
untrusted: every one goes through :func:`e` (``html.escape``). The only markup inserted
as is comes from :mod:`relmerge.report.plots`, whose labels are sanitised.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from importlib import resources
from typing import Any

from relmerge.decide.sequential import TestRule, tally_words, verdict_words
from relmerge.report.model import (
    Clarification,
    MergedGroup,
    ReportData,
    as_int,
    as_text,
    band_on,
)
from relmerge.report.plots import decision_row, decision_rows
from relmerge.report.words import code_hint, term

DESCRIPTION_CHARS = 300
SECTIONS = {
    "decisions": "Decisions",
    "scores": "Scores",
    "clusters": "Cluster sizes",
    "llm": "LLM",
    "issues": "Issues",
    "seconds": "Time",
    "groups": "Merged groups",
    "clarifications": "Clarifications",
    "rejected": "Rejected",
    "settings": "Settings",
}


def e(value: object) -> str:
    return html.escape(str(value), quote=True)


def words(kind: str, code: str, prose: bool = False) -> str:
    """A code in plain words; the tooltip says what it means and names the code."""
    found = term(kind, code)
    text = found.prose if prose else found.label
    return f'<span class="term" title="{e(code_hint(kind, code))}">{e(text)}</span>'


def words_and_code(kind: str, code: str) -> str:
    """Plain words, then the code in small print (tables a technical reader greps)."""
    return f'{words(kind, code)} <code class="code">{e(code)}</code>'


def _css() -> str:
    return resources.files("relmerge.report").joinpath("page.css").read_text(encoding="utf-8")


def render(data: ReportData, plots: dict[str, str | None], version: str) -> str:
    s = data.summary
    title = f"relmerge report: {data.out}"
    body = [
        "<header>",
        "<h1>relmerge report</h1>",
        f'<p class="meta">OUT <code>{e(data.out)}</code> · LLM <code>{e(s.llm_model)}</code>'
        f" · embedding <code>{e(s.embedding_model)}</code>"
        + (f" · run <code>{e(s.fingerprint[:16])}</code>" if s.fingerprint else "")
        + "</p>",
        _cards(data),
        "</header>",
        "<nav>" + "".join(f'<a href="#{k}">{e(v)}</a>' for k, v in SECTIONS.items()) + "</nav>",
    ]
    if data.notes:
        body.append('<div class="notes" id="notes"><strong>Notes</strong><ul>')
        body += [f"<li>{e(note)}</li>" for note in data.notes]
        body.append("</ul></div>")
    body += [
        '<div class="grid">',
        _plot_section("decisions", plots, _decisions_text(data)),
        _plot_section("seconds", plots, ""),
        "</div>",
        _plot_section("scores", plots, _thresholds_table(data), wide=True),
        '<div class="grid">',
        _plot_section("clusters", plots, _clusters_text(data)),
        _plot_section("llm", plots, _llm_text(data)),
        "</div>",
        _plot_section("issues", plots, _issues_table(data)),
        _groups_section(data),
        _clarifications_section(data),
        _rejected_section(data),
        _settings_section(data),
        f"<footer>relmerge {e(version)} · one self-contained page: no script, no external"
        " file.</footer>",
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)}</title><style>{_css()}</style></head>"
        f"<body><main>{''.join(body)}</main></body></html>\n"
    )


def _cards(data: ReportData) -> str:
    s, llm = data.summary, data.llm
    saved = 1 - s.output_relations / s.input_relations if s.input_relations else 0.0
    cards = [
        ("input relations", f"{s.input_relations:,}", f"{s.input_records:,} records"),
        ("rejected records", f"{data.rejected_count:,}", ""),
        ("output relations", f"{s.output_relations:,}", f"−{saved:.1%}"),
        ("exact merges", f"{s.exact_merges:,}", _rounds(s.exact_rounds)),
        ("semantic merges", f"{s.semantic_merges:,}", _rounds(s.semantic_rounds)),
        ("failed groups", f"{s.failed_groups:,}", ""),
        ("LLM requests", f"{llm.requests:,}", f"{llm.cache_hits:,} cache hits"),
        ("LLM tokens", f"{llm.prompt_tokens + llm.completion_tokens:,}", ""),
        ("pending clarifications", f"{data.pending_count:,}", f"{data.answered_count} answered"),
        ("issues", f"{sum(i.count for i in data.issues):,}", ""),
        ("seconds", f"{data.seconds.get('total', 0.0):.3g}", ""),
    ]
    items = "".join(
        f'<div class="card"><dt>{e(name)}</dt><dd>{e(value)}'
        + (f" <small>{e(extra)}</small>" if extra else "")
        + "</dd></div>"
        for name, value, extra in cards
    )
    return f'<dl class="cards" id="summary">{items}</dl>'


def _rounds(count: int) -> str:
    return f"{count} round" if count == 1 else f"{count} rounds"


def _plot_section(key: str, plots: dict[str, str | None], extra: str, wide: bool = False) -> str:
    """A plot and its text; when there is no plot the text alone, or a plain "nothing"."""
    svg = plots.get(key)
    figure = svg or ("" if extra else '<p class="empty">Nothing to plot for this run.</p>')
    css = ' class="wide"' if wide else ""
    return f'<section id="{key}"{css}><h2>{e(SECTIONS[key])}</h2>{figure}{extra}</section>'


def _table(
    headers: Iterable[str], rows: Iterable[Iterable[str]], numeric: set[int], css: str = ""
) -> str:
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{cell}</td>' if i in numeric else f"<td>{cell}</td>"
            for i, cell in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    classes = f' class="{css}"' if css else ""
    return f"<table{classes}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _decisions_text(data: ReportData) -> str:
    d = data.decisions
    hint = (
        f'<p class="hint">{d.lines:,} lines in the decision log; a semantic decision is about'
        " a pair of relations (a group when the LLM clusters a block).</p>"
    )
    rows = [stage_tier for stage_tier, _ in decision_rows(d)]
    if not rows:
        return hint
    items = "".join(
        f"<dt>{e(decision_row(stage, tier))}</dt><dd>{e(term('tier', tier).explain)}"
        f' <code class="code">{e(stage)} / {e(tier)}</code></dd>'
        for stage, tier in rows
    )
    return f'{hint}<dl class="glossary" id="glossary">{items}</dl>'


def _band_value(name: str, value: float | None) -> str:
    if band_on(name, value):
        return e(f"{value:g}")
    sentinel = f' <code class="code">{e(f"{value:g}")}</code>' if value is not None else ""
    return f'<span class="off">off</span>{sentinel}'


def _thresholds_table(data: ReportData) -> str:
    rows = [(words_and_code("band", k), _band_value(k, v)) for k, v in data.thresholds.items()]
    hint = (
        '<p class="hint">Only decisions made on scores carry them; pairs the LLM judged as a'
        " group are counted in the decisions plot.</p>"
    )
    return hint + _table(["band", "threshold"], rows, {1}, "kv")


def _clusters_text(data: ReportData) -> str:
    sizes = data.cluster_sizes
    if not sizes:
        return ""
    largest = max(sizes)
    return (
        f'<p class="hint">{data.group_count:,} output relations merge two or more inputs;'
        f" the largest has {largest} members.</p>"
    )


def _llm_text(data: ReportData) -> str:
    if data.summary.llm_model == "none":
        return '<p class="hint">This run had no language model (<code>--llm none</code>).</p>'
    return _canary_text(data.llm.canaries) + _cost_text(data.llm.cost)


def _canary_text(canaries: dict[str, Any]) -> str:
    """How the model answered the canary questions (pairs whose answer is certain), the
    verdict, the rule that reached it, and whether its merges were applied."""
    if not as_int(canaries.get("asked")):
        return ""
    rule = canaries.get("rule")
    stated = ""
    if isinstance(rule, dict):
        try:
            stated = TestRule(
                float(rule["good_agreement"]),
                float(rule["bad_agreement"]),
                float(rule["false_stop"]),
                float(rule["false_trust"]),
            ).text()
        except (KeyError, TypeError, ValueError):
            stated = ""
    tally = tally_words(canaries).replace(" right", "", 1)
    verdict = e(verdict_words(canaries))
    if canaries.get("distrusted"):
        verdict += f" (<strong>distrusted</strong>: {e(canaries.get('reason'))}; its pairs are in "
        verdict += "the clarifications)"
    rule_text = f" The rule: {e(stated)}." if stated else ""
    return (
        '<h3 id="canaries">Canary questions</h3>'
        f'<p id="canary-agreement">The model answered <strong>{e(tally)}</strong> certain '
        f"questions right: {verdict}.{rule_text}</p>"
    )


def _cost_text(cost: dict[str, Any]) -> str:
    """The cost: per task, requests and tokens (characters where the server sent no
    usage), what cached answers saved, and USD when the run was given the prices."""
    tasks = cost.get("tasks")
    if not isinstance(tasks, dict) or not tasks:
        return ""
    rows = []
    for name, task in tasks.items():
        task = task if isinstance(task, dict) else {}
        usd = task.get("usd")
        rows.append(
            (
                e(name),
                f"{as_int(task.get('requests')):,}",
                f"{as_int(task.get('prompt_tokens')):,}",
                f"{as_int(task.get('completion_tokens')):,}",
                f"{as_int(task.get('prompt_chars')):,}",
                f"{as_int(task.get('cache_hits')):,}",
                f"{as_int(task.get('saved_prompt_tokens')):,}",
                "" if not isinstance(usd, int | float) else f"{usd:.4f}",
            )
        )
    headers = ["task", "requests", "prompt tokens", "completion tokens", "prompt characters"]
    headers += ["cached answers", "prompt tokens saved", "USD"]
    measured = as_text(cost.get("measured"), "?")
    notes = [f"Tokens as measured: {e(measured)}."]
    if measured not in ("usage", "none"):
        notes.append("The server sent no usage for some answers: their characters are shown.")
    usd = cost.get("usd")
    if isinstance(usd, int | float):
        notes.append(
            f"USD {usd:.4f} at {e(cost.get('price_in_usd_per_million'))} / "
            f"{e(cost.get('price_out_usd_per_million'))} per million prompt / completion "
            f"tokens."
        )
    else:
        notes.append("No prices given (<code>--llm-price-in/--llm-price-out</code>): no USD.")
    return (
        '<h3 id="cost">Cost</h3>'
        + _table(headers, rows, {1, 2, 3, 4, 5, 6, 7})
        + "".join(f'<p class="hint">{note}</p>' for note in notes)
    )


def _issues_table(data: ReportData) -> str:
    if not data.issues:
        return '<p class="hint">No issues.</p>'
    rows = [
        (words_and_code("issue", i.code), e(i.severity), e(i.count), e(i.example))
        for i in data.issues
    ]
    return _table(["issue", "severity", "count", "example"], rows, {2})


def relation_html(record: dict[str, Any]) -> str:
    """One relation as ``source —name→ target [type]`` with its description, escaped."""
    text = as_text(record.get("description"))
    if len(text) > DESCRIPTION_CHARS:
        text = text[:DESCRIPTION_CHARS] + "…"
    attributes = record.get("attributes")
    attrs = (
        "; ".join(f"{e(k)}={e(v)}" for k, v in attributes.items())
        if isinstance(attributes, dict)
        else ""
    )
    return (
        '<div class="rel">'
        f'<span class="ent">{e(as_text(record.get("source_entity_name"), "?"))}</span> '
        f'<span class="name">—{e(as_text(record.get("name"), "?"))}→</span> '
        f'<span class="ent">{e(as_text(record.get("target_entity_name"), "?"))}</span> '
        f'<span class="type">[{e(as_text(record.get("type"), "?"))}]</span>'
        f'<div class="desc">{e(text)}</div>'
        + (f'<div class="attrs">{attrs}</div>' if attrs else "")
        + "</div>"
    )


def _groups_section(data: ReportData) -> str:
    parts = [f'<section id="groups"><h2>{SECTIONS["groups"]}</h2>']
    if not data.groups:
        parts.append('<p class="empty">No merged groups in this run.</p></section>')
        return "".join(parts)
    parts.append(
        f'<p class="hint">{len(data.groups)} of {data.group_count:,} merged groups: the largest'
        " and a random selection of the others (the same every time for one run).</p>"
    )
    if not data.members_shown:
        parts.append(
            '<p class="hint">Members are shown by id: OUT does not keep the input records.'
            " Pass the run's INPUT (<code>--input</code>) to see their names and"
            " descriptions.</p>"
        )
    parts += [_group_html(group) for group in data.groups]
    parts.append("</section>")
    return "".join(parts)


def _group_html(group: MergedGroup) -> str:
    tiers = ", ".join(
        f"{words('tier', t, prose=True)} ×{n}" for t, n in sorted(group.tiers.items())
    )
    merged = relation_html(group.relation) if group.relation else ""
    rows = []
    for member in group.members:
        record = member.record
        cell = relation_html(record) if record else '<span class="empty">not in INPUT</span>'
        rows.append((f'<span class="id">{e(member.relation_id)}</span>', cell))
    return (
        f'<article class="group"><h3><span class="id">{e(group.output_id)}</span>'
        f'<span class="badge">{len(group.members)} members</span>'
        + (f'<span class="tiers">merged by {tiers}</span>' if tiers else "")
        + f"</h3>{merged}"
        + _table(["member", "input relation"], rows, set(), "members")
        + "</article>"
    )


def _clarifications_section(data: ReportData) -> str:
    head = f'<section id="clarifications"><h2>{SECTIONS["clarifications"]}</h2>'
    if not data.pending_count:
        answered = f" ({data.answered_count} answered)" if data.answered_count else ""
        return f'{head}<p class="empty">No pending clarifications{answered}.</p></section>'
    hint = (
        f'<p class="hint">{data.pending_count:,} pending, {data.answered_count:,} answered;'
        f" showing {len(data.pending)}. Answer them with <code>relmerge review OUT</code>;"
        " answers apply when the command that made OUT runs into it again.</p>"
    )
    rows = [_clarification_row(c) for c in data.pending]
    table = _table(
        ["question", "records", "scores", "reason", "until a person answers"], rows, set()
    )
    return f"{head}{hint}{table}</section>"


def _clarification_row(question: Clarification) -> tuple[str, ...]:
    records = "".join(f'<div class="record">{relation_html(r)}</div>' for r in question.records)
    scores = "<br>".join(
        f'<span class="score">{words("score", k)} {v:.3g}</span>'
        for k, v in question.scores.items()
    )
    policy = question.policy_decision
    return (
        f'<span class="id">{e(question.id)}</span>',
        records,
        scores,
        reason_html(question.reason),
        words("verdict", policy) if policy else "",
    )


# How decide/block.py names the rules' verdict in a clarification's reason.
_TIER_IN_REASON = re.compile(r" ?\(tier ([a-z_]+)(?:, guards: ([a-z_, ]+))?\)")


def reason_html(reason: str) -> str:
    """A clarification's reason, escaped, its tier and guards in plain words."""
    parts, last = [], 0
    for match in _TIER_IN_REASON.finditer(reason):
        parts.append(e(reason[last : match.start()]) + ": " + words("tier", match[1], True))
        if match[2]:
            guards = [g.strip() for g in match[2].split(",") if g.strip()]
            parts.append("; " + ", ".join(words("guard", g) for g in guards))
        last = match.end()
    return "".join(parts) + e(reason[last:])


def _rejected_section(data: ReportData) -> str:
    head = f'<section id="rejected"><h2>{SECTIONS["rejected"]}</h2>'
    if not data.rejected_count:
        return f'{head}<p class="empty">No input record was rejected.</p></section>'
    parts = [head, f"<p>{data.rejected_count:,} input records were set aside (rejected.jsonl).</p>"]
    if data.rejected_reasons:
        rows = [(e(reason), e(count)) for reason, count in data.rejected_reasons]
        parts.append(_table(["reason", "records"], rows, {1}, "kv"))
        rows = [(f'<span class="id">{e(o)}</span>', e(r)) for o, r in data.rejected_examples]
        parts.append(_table(["example origin", "reason"], rows, set()))
    parts.append("</section>")
    return "".join(parts)


_SETTING_VALUES = {"true": "on", "false": "off", "null": "no limit"}


def _setting_value(key: str, value: str) -> str:
    if key == "unsure_policy":
        return words_and_code("verdict", value)
    return e(_SETTING_VALUES.get(value, value))


def _settings_section(data: ReportData) -> str:
    rows = [(words_and_code("setting", k), _setting_value(k, v)) for k, v in data.settings.items()]
    return (
        f'<section id="settings"><h2>{SECTIONS["settings"]}</h2>'
        + _table(["setting", "value"], rows, set(), "kv")
        + "</section>"
    )
