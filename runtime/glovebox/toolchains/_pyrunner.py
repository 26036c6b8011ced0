"""The Python code runner of ``Runtime.run(code, lang="py")``, and a program's source checked before a run.

The runner (``guest/python/runner.py``) is built like a Python tool: componentize-py
bundles CPython with it into one component, running its top level at build
time and keeping the memory that made (a run starts with the interpreter and
the runner initialised), in the ``py-code-runner`` world (``guest/python/runner.wit``:
a Python tool's world plus the run's ``host-call``). It is cached in the
toolchain directory (``GLOVEBOX_TOOLCHAINS``) by the digest of its source, the
WIT and the componentize-py version, so it is built once per machine.

A program is Python source defining ``async def main(input, tools)``; the host
parses it first (:func:`check_program`), so one that does not compile is refused
before the run exists, naming its line and column, as a JavaScript program's
esbuild error is.
"""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from ..core._errors import BuildError
from ._base import ONCE, Progress, announce
from ._binaries import find_tool, run_tool
from ._jstoolchain import _locked
from ._pybuild import _componentize_py_version

__all__ = ["check_program", "py_runner_component"]

_WORLD = "py-code-runner"


def py_runner_component(sdk: Path, cache_dir: Path, progress: Progress | None = None) -> Path:
    """The Python code runner's component (built on first need, then cached by content)."""
    src = sdk / "python" / "runner.py"
    wit = [sdk / "wit" / "world.wit", sdk / "python" / "runner.wit"]
    digest = hashlib.sha256(_componentize_py_version().encode() + b"\0" + src.read_bytes())
    for path in wit:
        digest.update(b"\0" + path.name.encode() + b"\0" + path.read_bytes())
    cached = cache_dir / f"py-code-runner-{digest.hexdigest()[:32]}.wasm"
    if not cached.is_file():
        with _locked(cache_dir):
            if not cached.is_file():
                announce(f"building the Python code runner of code mode into {cache_dir}, {ONCE}", progress, slow=True)
                _componentize(src, wit, cached)
    return cached


def _componentize(src: Path, wit: list[Path], cached: Path) -> None:
    tool = find_tool("componentize-py", "pip install 'glovebox-runtime[build]'")
    with tempfile.TemporaryDirectory(prefix="glovebox-pyrunner-") as tmp:
        stage = Path(tmp)
        (stage / "wit").mkdir()
        for path in wit:
            shutil.copyfile(path, stage / "wit" / path.name)
        shutil.copyfile(src, stage / "runner.py")
        staged = stage / "runner.wasm"
        argv = [tool, "-d", str(stage / "wit"), "-w", _WORLD, "componentize", "-p", str(stage), "runner"]
        run_tool([*argv, "-o", str(staged)], "componentize-py", cwd=stage, rename={})
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".tmp{os.getpid()}")
        shutil.copyfile(staged, partial)
        os.replace(partial, cached)


def check_program(source: str) -> None:
    """Refuse Python source that does not parse, or defines no top-level ``main`` (BuildError naming where)."""
    try:
        tree = ast.parse(source, filename="<program>")
    except SyntaxError as exc:
        where = f"<program>:{exc.lineno}:{exc.offset}" if exc.lineno else "<program>"
        raise BuildError(f"the program does not compile:\n{where}: {exc.msg}") from exc
    except ValueError as exc:  # a NUL byte
        raise BuildError(f"the program does not compile: {exc}") from exc
    defined: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(target.id for target in node.targets if isinstance(target, ast.Name))
    if "main" not in defined:
        raise BuildError("the program defines no function main: write `async def main(input, tools): ...`")
