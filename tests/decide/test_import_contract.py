"""The import contract of the decision kernel, read from the source's own imports.

Stages, engines and the judge reach decisions only through ``relmerge.decide``; the kernel
imports no I/O module; no module of relmerge takes part in an import cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import relmerge

SOURCE = Path(relmerge.__file__).parent

# What the kernel may import from relmerge: data types, config, prompts (pure request
# building and answer validation) and the model protocol.
KERNEL_MAY_USE = (
    "relmerge.decide",
    "relmerge.config",
    "relmerge.errors",
    "relmerge.model",
    "relmerge.normalize",
    "relmerge.ids",
    "relmerge.units",
    "relmerge.prompts",
    "relmerge.providers.base",
    "relmerge.providers.parsing",
)
# Libraries that do I/O (files, network, processes, databases): never in the kernel.
IO_LIBRARIES = (
    "os",
    "io",
    "pathlib",
    "shutil",
    "tempfile",
    "socket",
    "subprocess",
    "sqlite3",
    "httpx",
    "openai",
    "fsspec",
    "pyarrow",
    "asyncio.subprocess",
)
# Scoring and tier code: the drivers must not reach for it themselves.
DECISION_LIBRARIES = ("rapidfuzz",)
DRIVERS = ("stages/semantic/stage.py", "engines", "judge")


def module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> Iterator[str]:
    """Every module ``path`` imports, anywhere in it (lazy imports included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_name(path).rsplit(".", 0 if path.name == "__init__.py" else 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                yield f"{base}.{node.module}" if node.module else base
            elif node.module:
                yield node.module
                for alias in node.names:  # "from relmerge.decide import job" is a module
                    yield f"{node.module}.{alias.name}"


def files(where: str = "") -> list[Path]:
    root = SOURCE / where
    return [root] if root.is_file() else sorted(root.rglob("*.py"))


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in files()}


@pytest.mark.parametrize("path", files("decide"), ids=lambda p: p.name)
def test_the_kernel_imports_no_io_and_no_driver(path: Path) -> None:
    for name in imports(path):
        if name.startswith("relmerge"):
            assert name.startswith(KERNEL_MAY_USE), f"{path.name} imports {name}"
        else:
            assert name.split(".")[0] not in IO_LIBRARIES, f"{path.name} imports {name}"


@pytest.mark.parametrize("where", DRIVERS)
def test_drivers_decide_only_through_the_kernel(where: str) -> None:
    for path in files(where):
        for name in imports(path):
            assert name.split(".")[0] not in DECISION_LIBRARIES, f"{path} scores pairs itself"
            assert not name.startswith("relmerge.stages.semantic.tiers"), path


def test_no_module_takes_part_in_an_import_cycle() -> None:
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        graph[name] = {target for target in imports(path) if target in known and target != name}
    # A package's __init__ re-exporting its modules is not a cycle of ideas.
    for name in known:
        for target in list(graph[name]):
            if name.startswith(target + ".") and known[target].name == "__init__.py":
                graph[name].discard(target)
    cycles = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                cycles.append([*trail[trail.index(target) :], target])
            elif target not in state:
                visit(target, [*trail, target])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []
