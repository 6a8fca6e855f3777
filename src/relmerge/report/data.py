"""Gather the figures of the run in OUT into a :class:`ReportData`.

Only the result file is required (it is written last, so its presence means a complete
run); every other file may be missing or damaged, and the report says so in a note
instead of failing.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from relmerge.errors import InputError
from relmerge.io.write import MAPPING_FILE, RESULT_FILE
from relmerge.report.model import (
    THRESHOLDS,
    Clarification,
    Decisions,
    IssueCount,
    LLMUsage,
    Member,
    MergedGroup,
    ReportData,
    RunSummary,
    ScoredPair,
    as_float,
    as_int,
    as_text,
    outcome_of,
)
from relmerge.report.reading import JsonlObjects, Reservoir, input_records, read_json, relation_file
from relmerge.review.rerun import RECONCILE_RESULT, command_outline, made_by

SCORE_SAMPLE = 50_000  # scored decisions kept for the histograms
EXTRA_THRESHOLDS = ("auto_merge_description_cosine", "auto_keep_description_cosine")
SETTINGS = (
    "semantic_merge",
    "unsure_policy",
    "max_rounds",
    "max_attempts",
    "llm_batch_size",
    "semantic_batch_size",
    "max_llm_requests",
    "max_tokens",
)
_REASON_CHARS = 160


def gather(out: Path, input_path: Path | None = None, sample: int = 20) -> ReportData:
    """Read OUT (and INPUT for the members' text, when given); raise InputError when OUT
    holds no complete run."""
    result = _result(out)
    config = result.get("config")
    config = config if isinstance(config, dict) else {}
    notes: list[str] = []
    members = _members_by_output(out, notes)
    chosen = choose_groups(members, sample)
    decisions = _decisions(out, config, chosen, members, notes)
    if not decisions.by_stage_tier:
        _tiers_from_result(result, decisions)
    prefix = as_text(config.get("deduplicated_relations_prefix"), "deduplicated_relations")
    records = (
        input_records(input_path, [m for o in chosen for m in members[o]]) if input_path else {}
    )
    groups = [
        MergedGroup(
            output_id=output_id,
            relation=relation_file(out, prefix, output_id),
            members=[Member(m, records.get(m)) for m in members[output_id]],
            tiers=decisions.group_tiers.get(output_id, {}),
        )
        for output_id in chosen
    ]
    data = ReportData(
        out=str(out),
        summary=RunSummary.from_result(result),
        llm=LLMUsage.from_result(result),
        seconds=_seconds(result),
        # A band the config does not name is unknown, not off: it is left out.
        thresholds={
            key: as_float(config[key]) for key in (*THRESHOLDS, *EXTRA_THRESHOLDS) if key in config
        },
        settings={key: _setting(config[key]) for key in SETTINGS if key in config},
        issues=_issues(result),
        decisions=decisions,
        cluster_sizes=dict(sorted(Counter(len(m) for m in members.values()).items())),
        groups=groups,
        group_count=sum(1 for m in members.values() if len(m) > 1),
        members_shown=input_path is not None,
        pending=[],
        pending_count=0,
        answered_count=0,
        rejected_count=as_int(result.get("rejected_count")),
        rejected_reasons=[],
        rejected_examples=[],
        notes=notes,
    )
    _clarifications(out, config, data, sample)
    _rejected(out, config, data)
    return data


def _setting(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _result(out: Path) -> dict[str, Any]:
    path = out / RESULT_FILE
    if not out.is_dir() or not path.is_file():
        maker = made_by(out) if out.is_dir() else "run"
        if maker == "reconcile":
            raise InputError(
                f"{out} holds a reconcile proposal (`{command_outline(out, maker)}`), not a "
                f"run: relmerge report reads what `relmerge run` or `relmerge merge-into` "
                f"writes; the proposal's figures are in {out / RECONCILE_RESULT}"
            )
        raise InputError(
            f"no complete run in {out}: {RESULT_FILE} is missing "
            f"(run `{command_outline(out, maker)}` first)"
        )
    result = read_json(path)
    if not isinstance(result, dict):
        raise InputError(f"no complete run in {out}: {RESULT_FILE} is not a JSON object")
    return result


def _members_by_output(out: Path, notes: list[str]) -> dict[str, list[str]]:
    """Output id -> its input ids, in input order, from the id mapping."""
    mapping = read_json(out / MAPPING_FILE)
    if not isinstance(mapping, dict):
        notes.append(f"{MAPPING_FILE} is missing or unreadable: no cluster sizes, no groups.")
        return {}
    members: dict[str, list[str]] = {}
    for input_id, output_id in mapping.items():
        if isinstance(output_id, str):
            members.setdefault(output_id, []).append(input_id)
    return members


def choose_groups(members: dict[str, list[str]], sample: int, seed: int = 0) -> list[str]:
    """The merged groups to show: the largest quarter of ``sample`` (where over-merging
    would show), then a seeded random choice of the others; largest first."""
    order = {output_id: index for index, output_id in enumerate(members)}
    merged = [output_id for output_id, ids in members.items() if len(ids) > 1]
    by_size = sorted(merged, key=lambda o: (-len(members[o]), order[o]))
    largest = by_size[: math.ceil(sample / 4)]
    rest = by_size[len(largest) :]
    picked = largest + random.Random(seed).sample(rest, min(len(rest), sample - len(largest)))
    return sorted(picked, key=lambda o: (-len(members[o]), order[o]))


def _decisions(
    out: Path,
    config: dict[str, Any],
    chosen: list[str],
    members: dict[str, list[str]],
    notes: list[str],
) -> Decisions:
    """Stream the decision log: counts by stage, tier and verdict; a sample of the scores;
    the tiers of the merge decisions that touch a chosen group."""
    name = as_text(config.get("decisions_key"), "decisions.jsonl")
    decisions = Decisions()
    path = out / name
    if not path.is_file():
        notes.append(f"{name} is missing: decisions come from the result, no score plots.")
        return decisions
    group_of = {member: output_id for output_id in chosen for member in members[output_id]}
    group_of.update({output_id: output_id for output_id in chosen})
    scored: Reservoir[ScoredPair] = Reservoir(SCORE_SAMPLE)
    reader = JsonlObjects(path)
    for item in reader:
        decisions.lines += 1
        stage, tier = as_text(item.get("stage"), "?"), as_text(item.get("tier"), "?")
        verdict = as_text(item.get("verdict"), "?")
        counts = decisions.by_stage_tier.setdefault((stage, tier), {})
        counts[verdict] = counts.get(verdict, 0) + 1
        scores = item.get("scores")
        if stage == "semantic" and isinstance(scores, dict):
            fuzzy, cosine = as_float(scores.get("fuzzy")), as_float(scores.get("cosine"))
            if fuzzy is not None or cosine is not None:
                scored.add(ScoredPair(fuzzy, cosine, outcome_of(tier, verdict)))
        if verdict == "merge" and group_of:
            ids = [*_texts(item.get("member_ids")), *_texts(item.get("output_ids"))]
            for output_id in {group_of[i] for i in ids if i in group_of}:
                tiers = decisions.group_tiers.setdefault(output_id, {})
                tiers[tier] = tiers.get(tier, 0) + 1
    decisions.scored, decisions.scored_total = scored.items, scored.seen
    if reader.bad:
        notes.append(f"{name}: {reader.bad} unreadable line(s) skipped.")
    return decisions


def _texts(value: Any) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _tiers_from_result(result: dict[str, Any], decisions: Decisions) -> None:
    by_tier = result.get("decisions_by_tier")
    if isinstance(by_tier, dict):
        for tier, count in by_tier.items():
            decisions.by_stage_tier[("all", str(tier))] = {"any": as_int(count)}


def _seconds(result: dict[str, Any]) -> dict[str, float]:
    seconds = result.get("seconds")
    if not isinstance(seconds, dict):
        return {}
    values = {str(stage): as_float(value) for stage, value in seconds.items()}
    return {stage: value for stage, value in values.items() if value is not None}


def _issues(result: dict[str, Any]) -> list[IssueCount]:
    issues = result.get("issues")
    counts: Counter[tuple[str, str]] = Counter()
    examples: dict[tuple[str, str], str] = {}
    for issue in issues if isinstance(issues, list) else []:
        if not isinstance(issue, dict):
            continue
        key = (as_text(issue.get("code"), "?"), as_text(issue.get("severity"), "?"))
        counts[key] += 1
        examples.setdefault(key, as_text(issue.get("message")))
    return [
        IssueCount(code, severity, count, examples[(code, severity)])
        for (code, severity), count in counts.most_common()
    ]


def _clarifications(out: Path, config: dict[str, Any], data: ReportData, limit: int) -> None:
    name = as_text(config.get("clarifications_key"), "clarifications.jsonl")
    path = out / name
    if not path.is_file():
        data.notes.append(f"{name} is missing: pending clarifications unknown.")
        return
    answers_path = out / "answers.jsonl"
    answered = (
        {as_text(item.get("id")) for item in JsonlObjects(answers_path)}
        if answers_path.is_file()
        else set()
    )
    reader = JsonlObjects(path)
    for item in reader:
        question_id = as_text(item.get("id"), "?")
        if question_id in answered:
            data.answered_count += 1
            continue
        data.pending_count += 1
        if len(data.pending) < limit:
            data.pending.append(_clarification(question_id, item))
    if reader.bad:
        data.notes.append(f"{name}: {reader.bad} unreadable line(s) skipped.")


def _clarification(question_id: str, item: dict[str, Any]) -> Clarification:
    records = item.get("records")
    scores = item.get("scores")
    score_values = {
        str(key): number
        for key, value in (scores.items() if isinstance(scores, dict) else [])
        if (number := as_float(value)) is not None
    }
    return Clarification(
        id=question_id,
        records=[r for r in records if isinstance(r, dict)] if isinstance(records, list) else [],
        scores=score_values,
        reason=as_text(item.get("reason")),
        policy_decision=as_text(item.get("policy_decision")),
    )


def _rejected(out: Path, config: dict[str, Any], data: ReportData) -> None:
    name = as_text(config.get("rejected_key"), "rejected.jsonl")
    path = out / name
    if not path.is_file():
        data.notes.append(f"{name} is missing: the rejected count comes from the result.")
        return
    reasons: Counter[str] = Counter()
    count = 0
    reader = JsonlObjects(path)
    for item in reader:
        count += 1
        reason = as_text(item.get("reason"), "?")[:_REASON_CHARS]
        reasons[reason] += 1
        if len(data.rejected_examples) < 5:
            data.rejected_examples.append((as_text(item.get("origin"), "?"), reason))
    data.rejected_count = count
    data.rejected_reasons = reasons.most_common(10)
    if reader.bad:
        data.notes.append(f"{name}: {reader.bad} unreadable line(s) skipped.")
