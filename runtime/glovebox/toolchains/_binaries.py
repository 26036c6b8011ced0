"""Run the guest toolchains (Zig, wasm-tools, componentize-py) and find their binaries.

They come with the ``build`` extra; without it, a build names the extra to
install (:data:`BUILD_HINT`) instead of failing on a missing module.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..core._errors import BuildError

__all__ = ["BUILD_HINT", "find_tool", "read_source", "require_module", "run_tool", "tool_env"]

BUILD_HINT = "building tools needs the 'build' extra: pip install 'glovebox-runtime[build]'"


def run_tool(
    argv: list[str],
    what: str,
    cwd: Path | None = None,
    rename: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
) -> str:
    """Run a toolchain command and return what it printed; on failure raise BuildError with its output.

    ``rename`` maps staged paths in that output back to the author's files;
    ``env`` adds variables to the inherited environment.
    """
    try:
        env = tool_env({"RUST_BACKTRACE": "0", "RUST_LIB_BACKTRACE": "0", **(env or {})})
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=cwd, env=env)
    except FileNotFoundError as exc:
        raise BuildError(f"{what}: cannot run {argv[0]}: {exc.strerror}") from exc
    except subprocess.TimeoutExpired as exc:
        raise BuildError(f"{what} did not finish within 600 s") from exc
    if proc.returncode != 0:
        output = proc.stderr.strip() or proc.stdout.strip()
        for staged, real in (rename or {}).items():
            output = output.replace(staged, real)
        # componentize-py appends the Rust error chain and backtrace: noise to an author.
        output = output.split("\n\nCaused by:", 1)[0].split("\nStack backtrace:", 1)[0]
        raise BuildError(f"{what} failed:\n{output.strip()}")
    return proc.stdout


def find_tool(name: str, install: str) -> str:
    """A toolchain binary: the one installed beside this Python first, else on PATH."""
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        raise BuildError(f"{name} is not installed; {install}")
    return found


def require_module(module: str) -> None:
    """Check that the toolchain's Python package ``module`` can be imported.

    Raises:
        BuildError: it cannot; the message names the extra to install.
    """
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or blocked installation counts as missing
        found = False
    if not found:
        raise BuildError(f"{module} is not installed; {BUILD_HINT}")


def tool_env(extra: dict[str, str]) -> dict[str, str]:
    """The environment a toolchain command runs in: this process's, with ``extra`` added."""
    return {**os.environ, **extra}


def read_source(src: Path) -> str:
    """A tool's source text; BuildError when it is not UTF-8."""
    try:
        return src.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BuildError(f"{src}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
