"""agents/ stays walkable: its packages import only the ones below them, no module imports one that
imports it back, and no module grows past 450 lines.

    runner/  ->  threads/, subagents/  ->  graph/  ->  tools/  ->  the shared modules at the top
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

AGENTS = REPO / "agents"
# A package may import its own modules and those of lower floors; the entry (__main__) anything.
FLOORS = {"": 0, "tools": 1, "graph": 2, "threads": 3, "subagents": 3, "runner": 4, "__main__": 5}
MAX_LINES = 450


def module_of(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_of(path): path for path in sorted(AGENTS.rglob("*.py"))}


def imported(path: Path, known: set[str]) -> set[str]:
    """The agents modules the file imports, at any depth (functions, `if TYPE_CHECKING:`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # `from package import module` imports the module; `from module import name`, the module.
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != "agents":
                found.add(name)
    return found


def package_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 2 and parts[1] in FLOORS:  # agents.runner, agents.__main__
        return parts[1]
    return parts[1] if len(parts) > 2 else ""


def graph() -> dict[str, set[str]]:
    found = modules()
    return {module: imported(path, set(found)) - {module} for module, path in found.items()}


def test_packages_import_only_the_floors_below_them() -> None:
    upward = [
        f"{module} ({package_of(module) or 'top'}) imports {target} ({package_of(target) or 'top'})"
        for module, targets in graph().items()
        for target in sorted(targets)
        if package_of(target) != package_of(module)
        and FLOORS[package_of(target)] >= FLOORS[package_of(module)]
    ]
    assert upward == [], "an import up or across agents/ (see this module's docstring):\n" + "\n".join(upward)


def test_no_module_imports_one_that_imports_it_back() -> None:
    edges = graph()
    circles: list[list[str]] = []

    def walk(module: str, path: list[str], seen: set[str]) -> None:
        for target in sorted(edges.get(module, ())):
            if target == path[0]:
                circles.append([*path, target])
            elif target not in seen and target > path[0]:  # each circle once, from its smallest module
                seen.add(target)
                walk(target, [*path, target], seen)

    for start in sorted(edges):
        walk(start, [start], {start})
    assert circles == [], "circles of imports in agents/:\n" + "\n".join(" -> ".join(c) for c in circles)


@pytest.mark.parametrize("path", sorted(AGENTS.rglob("*.py")), ids=lambda p: str(p.relative_to(REPO)))
def test_no_module_is_longer_than_450_lines(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(REPO)} has {lines} lines: split it by responsibility"
