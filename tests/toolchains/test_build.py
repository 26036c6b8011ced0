"""``glovebox build`` and ``glovebox demo`` on an install without the ``build`` extra."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import glovebox
from glovebox.cli._main import cli
from glovebox.toolchains import _binaries as _toolchain

ROOT = Path(__file__).resolve().parents[2]
HINT = "building tools needs the 'build' extra: pip install 'glovebox-runtime[build]'"
#: Imported at interpreter start-up: the ``ziglang`` package is absent, as on an install without the extra.
NO_ZIGLANG = 'import sys\nsys.modules["ziglang"] = None  # `import ziglang` and `python -m ziglang` fail\n'


def without_ziglang(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m glovebox ARGS`` in an interpreter (and its children) where ``ziglang`` cannot be imported."""
    shim = tmp_path / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(NO_ZIGLANG)
    path = os.pathsep.join(p for p in (str(shim), str(ROOT / "runtime"), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    argv = [sys.executable, "-m", "glovebox", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)


def test_the_shim_hides_ziglang(tmp_path: Path) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(NO_ZIGLANG)
    env = {**os.environ, "PYTHONPATH": str(shim)}
    probe = subprocess.run([sys.executable, "-c", "import ziglang"], capture_output=True, text=True, env=env)
    assert probe.returncode == 1 and "ModuleNotFoundError" in probe.stderr


@pytest.mark.parametrize("command", ["build", "demo"])
def test_without_the_build_extra_the_commands_name_it(tmp_path: Path, command: str) -> None:
    src = tmp_path / "tool.c"
    src.write_text('#include "glovebox.h"\n')
    args = ["build", str(src), "-o", str(tmp_path / "tool.wasm")] if command == "build" else ["demo"]
    result = without_ziglang(tmp_path, *args)
    assert result.returncode == 1
    assert result.stderr == f"error [build_failed]: ziglang is not installed; {HINT}\n"
    assert result.stdout == ""
    assert not (tmp_path / "tool.wasm").exists()


def test_without_wasm_tools_the_build_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_toolchain.shutil, "which", lambda *args, **kwargs: None)
    src = tmp_path / "tool.c"
    src.write_text('#include "glovebox.h"\n')
    with pytest.raises(glovebox.BuildError) as raised:
        glovebox.build(src, tmp_path / "tool.wasm")
    assert raised.value.message == f"wasm-tools is not installed; {HINT}"
    result = CliRunner().invoke(cli, ["demo"])
    assert (result.exit_code, result.output) == (1, f"error [build_failed]: wasm-tools is not installed; {HINT}\n")
