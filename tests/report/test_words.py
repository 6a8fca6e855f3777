"""Every code the kernel can write has plain words in the report.

The codes are read from the source (string literals passed as ``tier=``, ``verdict=``,
``code=``, positionally or by keyword, and module constants they name; the guards
``fired_guards`` appends; the keys of the pair scores; the decision stages' Literal), so a
new tier or issue code without a label fails here instead of reaching a reader raw.
"""

from __future__ import annotations

import ast
import typing
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import relmerge
from relmerge.config import DeduplicateRelationsConfig
from relmerge.model import Stage
from relmerge.report.svg import label
from relmerge.report.words import KINDS, code_hint, plain, term

SRC = Path(relmerge.__file__).parent
PARAMS = {"tier": "tier", "verdict": "verdict", "code": "issue"}


def _trees() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        if "report" not in path.relative_to(SRC).parts:
            yield path, ast.parse(path.read_text(encoding="utf-8"))


def _module_constants(trees: list[tuple[Path, ast.Module]]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for _, tree in trees:
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        found.setdefault(target.id, set()).add(node.value.value)
    return found


def _strings(node: ast.AST | None, constants: dict[str, set[str]]) -> set[str]:
    """The strings an expression can be: literals, both arms of ``a if c else b``, either
    side of ``or``, the items of a tuple, a module constant; nothing for other values."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        return _strings(node.body, constants) | _strings(node.orelse, constants)
    if isinstance(node, ast.BoolOp):
        return set().union(*(_strings(value, constants) for value in node.values))
    if isinstance(node, ast.Tuple | ast.List):
        return set().union(*(_strings(item, constants) for item in node.elts))
    if isinstance(node, ast.Name):
        return constants.get(node.id, set())
    return set()


def _signatures(trees: list[tuple[Path, ast.Module]]) -> dict[str, list[list[str]]]:
    """Positional parameter names by callable name: functions, classes' ``__init__``,
    dataclasses' fields."""
    found: dict[str, list[list[str]]] = {}
    for _, tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names = [a.arg for a in node.args.args if a.arg not in ("self", "cls")]
                found.setdefault(node.name, []).append(names)
            elif isinstance(node, ast.ClassDef):
                init = next(
                    (
                        n
                        for n in node.body
                        if isinstance(n, ast.FunctionDef) and n.name == "__init__"
                    ),
                    None,
                )
                if init is not None:
                    names = [a.arg for a in init.args.args if a.arg != "self"]
                elif any("dataclass" in ast.unparse(d) for d in node.decorator_list):
                    names = [
                        n.target.id
                        for n in node.body
                        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
                    ]
                else:
                    continue
                found.setdefault(node.name, []).append(names)
    return found


@cache
def kernel_codes() -> dict[str, frozenset[str]]:
    """Every code by kind, as the source writes it."""
    trees = list(_trees())
    constants = _module_constants(trees)
    signatures = _signatures(trees)
    codes: dict[str, set[str]] = {kind: set() for kind in KINDS}
    for path, tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                # Defaults of a parameter named like a code (``code: str = FAILED``).
                args = node.args.args[len(node.args.args) - len(node.args.defaults) :]
                for arg, default in zip(args, node.args.defaults, strict=True):
                    if arg.arg in PARAMS:
                        codes[PARAMS[arg.arg]] |= _strings(default, constants)
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            for keyword in node.keywords:
                if keyword.arg in PARAMS:
                    codes[PARAMS[keyword.arg]] |= _strings(keyword.value, constants)
                if keyword.arg == "guards":
                    codes["guard"] |= _strings(keyword.value, constants)
            for params in signatures.get(name, []):
                for index, value in enumerate(node.args[: len(params)]):
                    if params[index] in PARAMS:
                        codes[PARAMS[params[index]]] |= _strings(value, constants)
            if name == "append" and path.name == "guards.py":
                codes["guard"] |= _strings(node.args[0], constants)
            if name in ("timed", "lap"):
                codes["time"] |= _strings(node.args[0], constants)
        if path.name == "scores.py":
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef) and node.name == "as_dict":
                    for returned in ast.walk(node):
                        if isinstance(returned, ast.Dict):
                            for key in returned.keys:
                                codes["score"] |= _strings(key, constants)
    codes["stage"] |= set(typing.get_args(Stage))
    policy = DeduplicateRelationsConfig.model_fields["unsure_policy"].annotation
    codes["verdict"] |= set(typing.get_args(policy))
    return {kind: frozenset(found) for kind, found in codes.items()}


def test_the_scan_finds_the_codes_it_must() -> None:
    """The scanner itself: it sees literals, positional arguments, module constants,
    both arms of a conditional, appended guards and the score keys."""
    codes = kernel_codes()
    assert {"remembered", "direction_unknown", "human", "llm", "policy"} <= codes["tier"]
    assert {"embedding_high", "description_high", "identical", "endpoints"} <= codes["tier"]
    assert {"llm_needed", "partial_merge", "split", "failed", "keep_both"} <= codes["verdict"]
    assert {"deduplication_failed", "llm_budget_exhausted", "llm_unavailable"} <= codes["issue"]
    assert {"possible_entity_duplicate", "self_loop_after_entity_mapping"} <= codes["issue"]
    assert {"numbers", "wording", "event_state"} <= codes["guard"]
    assert codes["score"] == {"fuzzy", "cosine", "name_cosine"}
    assert codes["stage"] == {"exact", "semantic", "judge"}
    assert {"load", "embed", "write", "waiting for workers"} <= codes["time"]


def test_every_code_the_kernel_writes_has_plain_words() -> None:
    missing = {
        kind: sorted(codes - set(KINDS[kind])) for kind, codes in kernel_codes().items() if codes
    }
    assert {kind: codes for kind, codes in missing.items() if codes} == {}


def test_labels_are_plain_and_drawable() -> None:
    """No label is a code: no underscores, not the code itself; and each survives the
    plots' sanitiser unchanged (ASCII, no ``$``)."""
    for kind, table in KINDS.items():
        for code, words in table.items():
            assert "_" not in words.label and "_" not in words.long, (kind, code)
            assert words.label != code or " " in code, (kind, code)
            assert label(words.label, 200) == words.label, (kind, code)
            assert words.explain.endswith("."), (kind, code)


def test_the_words_the_brief_asks_for() -> None:
    assert plain("tier", "remembered") == "a person's earlier answer"
    assert plain("tier", "human") == "a person"
    assert term("tier", "direction_unknown").prose == (
        "direction unknown (no rule knows if it is symmetric)"
    )
    assert code_hint("tier", "guard").endswith("(tier: guard)")


def test_an_unknown_code_reads_as_words_not_as_a_code() -> None:
    assert plain("tier", "some_new_tier") == "some new tier"
    assert code_hint("issue", "odd_code") == "issue odd_code (issue: odd_code)"
    assert plain("verdict", "_") == "?"
