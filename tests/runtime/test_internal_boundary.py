"""No module outside ``glovebox.runtime`` touches a private attribute of a Runtime.

The rest of the package uses a Runtime through its public API (a pool worker
or a Ray replica hands it a prepared call, ``Runtime.send``). This test finds every
private name the ``Runtime`` class defines (its ``_methods`` and the
``self._attributes`` it assigns) and fails on any attribute access with one of
those names, in any module outside ``runtime/glovebox/runtime/``, on anything
but ``self`` (a class's own private attributes are its own business).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "runtime" / "glovebox"


def runtime_private_names() -> set[str]:
    tree = ast.parse((PACKAGE / "runtime" / "_runtime.py").read_text())
    runtime = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Runtime")
    names = set()
    for node in ast.walk(runtime):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("_"):
            names.add(node.name)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            if isinstance(node.ctx, ast.Store) and node.attr.startswith("_"):
                names.add(node.attr)
    return {name for name in names if not (name.startswith("__") and name.endswith("__"))}


def violations(root: Path, private: set[str]) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        if (PACKAGE / "runtime") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Attribute) or node.attr not in private:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            found.append(f"{path.relative_to(root)}:{node.lineno}: .{node.attr}")
    return found


def test_runtime_private_names_are_found() -> None:
    private = runtime_private_names()
    assert {"_chain", "_registry", "_recorder", "_check_open", "_gate"} <= private


def test_the_check_catches_a_private_access(tmp_path: Path) -> None:
    (tmp_path / "leak.py").write_text("def f(rt):\n    return rt._registry\n")
    assert violations(tmp_path, runtime_private_names()) == ["leak.py:2: ._registry"]


def test_no_module_outside_the_runtime_package_touches_runtime_privates() -> None:
    assert violations(PACKAGE, runtime_private_names()) == []
