"""The package's import graph has no cycles, lazy and type-checking imports included.

Every ``import``/``from ... import`` in ``runtime/glovebox`` is an edge, wherever it
sits (module level, inside a function, under ``TYPE_CHECKING``), so a cycle cannot
hide behind a deferred import; importing ``glovebox.policy._x`` is also an edge to
``glovebox.policy`` (its ``__init__`` runs first). The root package is left out:
every private module is re-exported by it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "runtime" / "glovebox"


def _module_name(path: Path) -> str:
    parts = ["glovebox", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    if node.level == 0:
        base = node.module or ""
    else:
        package = importer.split(".") if is_package else importer.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, node.module] if node.module else package)
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def import_graph() -> dict[str, set[str]]:
    """Module name -> the glovebox modules it imports."""
    files = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                targets = _resolve(name, path.name == "__init__.py", node)
            else:
                continue
            for target in targets:
                # Importing glovebox.policy._x runs glovebox/policy/__init__.py first.
                parts = target.split(".")
                for depth in range(2, len(parts) + 1):
                    graph[name].add(".".join(parts[:depth]))
    for name in graph:
        # A module's own packages are already being imported when it runs: no edge.
        ancestors = {name.rsplit(".", depth)[0] for depth in range(1, name.count(".") + 1)}
        graph[name] = {target for target in graph[name] if target in files and target != name} - ancestors
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph, as a path that ends where it starts, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_lazy_and_relative_imports() -> None:
    graph = import_graph()
    assert "glovebox.toolchains._pybuild" in graph["glovebox.toolchains._python"]  # imported inside build()
    assert "glovebox.core._errors" in graph["glovebox.policy._loader"]  # from .._errors


def test_the_package_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle or [])
