"""What a run left undecided, why, and the ways on (the end of ``relmerge run``'s report).

A run without an LLM (or whose LLM budget ran out, or whose LLM was unavailable or gave
no valid verdict) keeps apart every pair the rules cannot decide and writes it to
``clarifications.jsonl``. Its output is then complete but not finished: a GraphRAG user
got an identical copy back and was not told why. This says how many pairs (in how many
blocks), why the rules could not decide them, and the two ways to decide them: a person
answers with ``relmerge review OUT`` (which then re-runs the command), or the same command
runs with an LLM.
"""

from __future__ import annotations

import shlex
import shutil
import textwrap
from collections.abc import Iterable, Sequence

from relmerge.run.result import RunResult
from relmerge.stores.fsspec_store import redact_url

# Why the rules left a pair (its tier), as a reader would say it.
_TIERS = {
    "direction_unknown": "point opposite ways between the same two entities, and nothing "
    "says whether the relation reads both ways",
    "guard": "differ in a number, date, role, negation or voice that only a reader can weigh",
    "band": "are worded neither alike enough to merge nor unlike enough to keep apart",
}
_LLM_OPTIONS = {"--llm", "--llm-base-url", "--llm-model"}
_BUDGET_OPTIONS = {"--max-llm-requests", "--max-tokens"}


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count:,} {one if count == 1 else many or one + 's'}"


def _without(args: Sequence[str], options: set[str]) -> list[str]:
    """``args`` without ``options`` and their values (``--opt V`` or ``--opt=V``)."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in options:
            skip = True
        elif arg.split("=", 1)[0] not in options:
            kept.append(arg)
    return kept


def _cause(result: RunResult) -> tuple[str, str]:
    """Why the LLM did not decide them, and the command that asks it (as a hint)."""
    if result.llm_model in (None, "none"):
        return "no LLM was given (--llm none)", "llm"
    if result.llm_budget.exhausted:
        return "the LLM budget ran out (--max-llm-requests / --max-tokens)", "budget"
    if result.llm_unavailable_group_count:
        return "the LLM was unavailable for them", "again"
    return "the LLM gave no valid verdict on them", "model"


def _reasons(result: RunResult) -> list[str]:
    lines = []
    for tier, count in sorted(result.llm_needed_pair_tiers.items(), key=lambda item: -item[1]):
        why = _TIERS.get(tier, f"are left by the rules (tier {tier})")
        lines.append(f"  - {count:,}: {why};")
    names = result.llm_needed_description_only_pair_count
    if names:
        lines.append(
            f"  - for {names:,} of them the names prove nothing (a generic name such as "
            '"related", or one name on both): the descriptions alone need a judge.'
        )
    elif lines:
        lines[-1] = lines[-1][:-1] + "."
    return lines


def _shown(args: Sequence[str]) -> list[str]:
    """Arguments as a message may show them: no URL credentials, no storage option
    values (they may be secrets)."""
    shown: list[str] = []
    for arg in args:
        if shown and shown[-1] == "--storage-option":
            arg = arg.split("=", 1)[0] + "=…"
        elif arg.startswith("--storage-option="):
            arg = arg.split("=", 2)[0] + "=" + arg.split("=", 2)[1] + "=…"
        shown.append(redact_url(arg))
    return shown


def _llm_command(program: str, argv: Sequence[str] | None, hint: str, out: str) -> str:
    """The run's own command, changed to ask an LLM (placeholders in capitals)."""
    args = _shown(argv) if argv else ["run", "INPUT", "--output", out, "…"]
    if hint == "llm":
        args = [*_without(args, _LLM_OPTIONS), "--llm-base-url", "URL", "--llm-model", "NAME"]
    elif hint == "budget":
        args = [*_without(args, _BUDGET_OPTIONS), "--max-llm-requests", "N"]
    elif hint == "model":
        args = [*_without(args, {"--llm-model"}), "--llm-model", "NAME"]
    if hint != "again" and "--overwrite" not in args:
        # Other settings make another run: OUT holds this one, which it then replaces.
        args.append("--overwrite")
    placeholders = ("URL", "NAME", "N", "…", "INPUT")
    return " ".join([program, *(a if a in placeholders else shlex.quote(a) for a in args)])


def terminal_width() -> int:
    """Columns to wrap prose at: the terminal's ($COLUMNS first), 80 in a pipe."""
    return max(40, shutil.get_terminal_size((80, 24)).columns)


def wrap_lines(lines: Iterable[str], width: int | None = None) -> list[str]:
    """Prose lines wrapped at words to ``width`` (the terminal's): a long paragraph is
    read on screen, not scrolled sideways. Continuation lines keep the line's indent (a
    bullet's text stays under its text)."""
    width = width or terminal_width()
    wrapped: list[str] = []
    for line in lines:
        for part in line.split("\n"):
            text = part.lstrip(" ")
            indent = part[: len(part) - len(text)]
            hang = indent + ("  " if text.startswith("- ") else "")
            wrapped.extend(
                textwrap.wrap(
                    text,
                    width,
                    initial_indent=indent,
                    subsequent_indent=hang,
                    break_long_words=False,
                    break_on_hyphens=False,
                )
                or [""]
            )
    return wrapped


# ``click.Context.meta`` key set by ``relmerge demo``: the run says what is left, and the
# demo says the ways on (once, with commands the demo takes).
DEMO_META = "relmerge.demo"


def left_to_do(
    result: RunResult,
    out: str,
    program: str = "relmerge",
    argv: Sequence[str] | None = None,
    reviewable: bool = True,
    ways_on: bool = True,
) -> list[str]:
    """Lines that end a run's report when it left pairs or groups undecided (none when
    it did not). ``argv``: the run's arguments (``run INPUT …``); ``reviewable``: OUT is
    a local folder, where ``relmerge review`` answers apply; ``ways_on``: end with the
    commands that decide them (the demo lists its own)."""
    pairs = result.llm_needed_pair_count
    groups = result.llm_needed_group_count
    unsure = max(0, result.clarification_count - pairs)
    if not (pairs or groups or unsure):
        return []
    cause, hint = _cause(result)
    lines: list[str] = []
    if pairs:
        blocks = result.llm_needed_block_count
        where = f" in {_plural(blocks, 'block')}" if blocks else ""
        lines.append(
            f"{_plural(pairs, 'pair')} of relations{where} {'is' if pairs == 1 else 'are'} "
            f"left undecided, kept apart for now (clarifications.jsonl): {cause}, and only "
            f"an LLM or a person can decide {'it' if pairs == 1 else 'them'}. The rules "
            f"cannot: {'it' if pairs == 1 else 'they'}"
        )
        lines.extend(_reasons(result))
    if unsure:
        lines.append(
            f"The LLM was unsure about {_plural(unsure, 'question')} (clarifications.jsonl): "
            "only a person can answer them; the unsure policy decided for now."
        )
    if groups:
        lines.append(
            f"{_plural(groups, 'exact-key group')} whose descriptions differ "
            f"{'was' if groups == 1 else 'were'} left unmerged: {cause}; only an LLM merges "
            "them (or run with the semantic stage on, where a person can answer them)."
        )
    ways = []
    if not ways_on:
        return lines
    if reviewable and (pairs or unsure):
        ways.append(
            f"  {program} review {shlex.quote(out)}\n"
            "      a person answers them; the review then re-runs this command to apply the answers"
        )
    if pairs or groups:
        ask = {
            "llm": "an LLM judges them (any OpenAI-compatible server: vLLM, Ollama, "
            "llama.cpp, OpenAI…); this run's outputs are replaced",
            "budget": "the LLM is given a larger budget (its answers so far are cached); "
            "this run's outputs are replaced",
            "again": "the LLM is asked again (its answers so far are cached)",
            "model": "another model judges them; this run's outputs are replaced",
        }[hint]
        ways.append(f"  {_llm_command(program, argv, hint, out)}\n      {ask}")
    if ways:
        lines.append("Two ways on:" if len(ways) == 2 else "The way on:")
        lines.extend(ways)
    return lines
