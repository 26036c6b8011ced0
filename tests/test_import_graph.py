"""The package's import graph has no cycles, lazy and type-checking imports included.

Every ``import``/``from ... import`` in ``runtime/glovebox`` is an edge, wherever it
sits (module level, inside a function, under ``TYPE_CHECKING``), so a cycle cannot
hide behind a deferred import; importing ``glovebox.policy._x`` is also an edge to
``glovebox.policy`` (its ``__init__`` runs first). A module's own packages are
already being imported when it runs, so importing one of them is no edge,
unless the module reads names from it (``from . import _x``, ``from .. import y``):
then the package must have run far enough, which a package that loads the module
lazily (``servers/__init__`` loads ``_api``) cannot promise. The root package is
left out: every private module is re-exported by it. Each module of
``glovebox.servers`` once in a cycle is also imported first, alone, in a fresh interpreter.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "runtime" / "glovebox"


def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = [package.name, *path.relative_to(package).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    if node.level == 0:
        base = node.module or ""
    else:
        package = importer.split(".") if is_package else importer.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, node.module] if node.module else package)
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module name -> the modules of ``package`` (default: glovebox) it imports."""
    files = {_module_name(path, package): path for path in package.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in files}
    read_from: dict[str, set[str]] = {name: set() for name in files}  # packages a module reads names from
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                targets = _resolve(name, path.name == "__init__.py", node)
                read_from[name].add(targets[0])
            else:
                continue
            for target in targets:
                # Importing glovebox.policy._x runs glovebox/policy/__init__.py first.
                parts = target.split(".")
                for depth in range(2, len(parts) + 1):
                    graph[name].add(".".join(parts[:depth]))
    for name in graph:
        # A module's own packages are already being imported when it runs: no edge, unless it reads from one.
        ancestors = {name.rsplit(".", depth)[0] for depth in range(1, name.count(".") + 1)} - read_from[name]
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


def test_reading_names_from_a_lazy_parent_package_is_a_cycle(tmp_path: Path) -> None:
    # The shape glovebox.servers once had: __init__ loads _api lazily, _api loads _console,
    # and _console reads a sibling through the package (``from . import _charts``).
    root = tmp_path / "top"
    package = root / "pkg"
    package.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (package / "__init__.py").write_text("def __getattr__(name):\n    from ._api import create_app\n")
    (package / "_api.py").write_text("def create_app():\n    from ._console import routes\n")
    (package / "_console.py").write_text("from . import _charts\nfrom ._auth import key\n")
    (package / "_charts.py").write_text("")
    (package / "_auth.py").write_text("")
    graph = import_graph(root)
    assert "top.pkg" in graph["top.pkg._console"] and "top.pkg" not in graph["top.pkg._api"], graph
    assert find_cycle(graph) == ["top.pkg", "top.pkg._api", "top.pkg._console", "top.pkg"]
    (package / "_console.py").write_text("from ._charts import draw\nfrom ._auth import key\n")
    assert find_cycle(import_graph(root)) is None


def test_the_servers_modules_once_in_a_cycle_each_import_first_in_a_fresh_interpreter() -> None:
    modules = ["glovebox.servers", "glovebox.servers._api", "glovebox.servers._console"]
    running = {
        module: subprocess.Popen(
            [sys.executable, "-c", f"import {module}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for module in modules
    }
    failed = {}
    for module, process in running.items():
        output, _ = process.communicate(timeout=120)
        if process.returncode != 0:
            failed[module] = output[-2000:]
    assert failed == {}
