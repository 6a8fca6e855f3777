"""The shape of the code, read from its own imports and definitions (``ast``).

* Layers: every module of ``src/relmerge`` belongs to one layer of the table written in
  ``docs/ARCHITECTURE.md`` (the one place it is written), and imports only from its own
  layer and the layers below it — lazy imports inside functions and imports for type
  checking included.
* No import cycle between folders (each top-level package one node, each root module
  one); ``tests/decide/test_import_contract.py`` checks that no module takes part in a
  cycle.
* No function longer than :data:`MAX_LINES` lines (``def`` to its end) without the
  reason written beside it: a ``# long: <reason>`` comment on the ``def`` line or the
  lines just above it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import relmerge

SOURCE = Path(relmerge.__file__).parent
ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "ARCHITECTURE.md"
MAX_LINES = 80
LONG = re.compile(r"#\s*long:\s*\S")


def module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(SOURCE.rglob("*.py"))}


def imported(path: Path, known: dict[str, Path]) -> Iterator[tuple[int, str]]:
    """(line, module of relmerge) for every import anywhere in ``path``: a name imported
    from a package that is a module of its own counts as that module."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield node.lineno, target


def unit(module: str) -> str:
    """The folder (``relmerge.run``) or root module (``relmerge.model``) of a module; the
    package itself is ``relmerge``."""
    return ".".join(module.split(".")[:2])


def layer_table() -> list[tuple[str, list[str]]]:
    """The layers, lowest first, as ARCHITECTURE.md writes them: the lines of the
    ```` ```text ```` block after the ``<!-- layers -->`` marker, each ``layer: names``."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    block = text.split("<!-- layers -->", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    table = []
    for line in block.strip().splitlines():
        layer, _, names = line.partition(":")
        table.append((layer.strip(), names.split()))
    return table


def layers() -> dict[str, int]:
    """Rank (0: lowest) by unit name (``relmerge.run``; ``relmerge`` for the package)."""
    ranks = {}
    for rank, (_, names) in enumerate(layer_table()):
        for name in names:
            ranks["relmerge" if name == "relmerge" else f"relmerge.{name}"] = rank
    return ranks


def test_every_folder_and_root_module_has_a_layer() -> None:
    ranks = layers()
    missing = sorted({unit(name) for name in modules()} - set(ranks))
    assert missing == [], f"add them to the layer table of {ARCHITECTURE.name}"
    gone = sorted(set(ranks) - {unit(name) for name in modules()})
    assert gone == [], f"the layer table of {ARCHITECTURE.name} names what is not there"


def test_no_import_from_a_lower_layer_up_into_a_higher_one() -> None:
    ranks, known, table = layers(), modules(), layer_table()
    upward = []
    for name, path in known.items():
        here = ranks[unit(name)]
        for line, target in imported(path, known):
            there = ranks[unit(target)]
            if there > here:
                upward.append(
                    f"{path.relative_to(SOURCE)}:{line} ({table[here][0]}) imports "
                    f"{target} ({table[there][0]})"
                )
    assert upward == []


def test_no_import_cycle_between_folders() -> None:
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        here = unit(name)
        graph.setdefault(here, set())
        for _, target in imported(path, known):
            if unit(target) != here:
                graph[here].add(unit(target))
    cycles = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                cycles.append(" -> ".join([*trail[trail.index(target) :], target]))
            elif target not in state:
                visit(target, [*trail, target])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def long_functions(path: Path) -> Iterator[str]:
    """The functions of ``path`` longer than MAX_LINES with no ``# long:`` reason."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for node in ast.walk(ast.parse("\n".join(lines))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        if length <= MAX_LINES:
            continue
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        beside = lines[max(0, first - 3) : node.lineno]  # comments above, decorators, def
        if not any(LONG.search(line) for line in beside):
            yield f"{path.relative_to(SOURCE)}:{node.lineno} {node.name} ({length} lines)"


def test_no_long_function_without_its_reason() -> None:
    found = [entry for path in modules().values() for entry in long_functions(path)]
    assert found == [], f"split them, or write '# long: <reason>' beside the def: {found}"
