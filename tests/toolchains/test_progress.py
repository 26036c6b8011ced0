"""A build step that may take more than a few seconds says so on stderr, terminal or not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import glovebox
from glovebox.toolchains._base import ONCE, BuildContext, announce
from glovebox.toolchains._c import zig_step

ROOT = Path(__file__).resolve().parents[2]


def test_a_slow_step_goes_to_stderr_when_nobody_listens(capsys: pytest.CaptureFixture[str]) -> None:
    announce("quick", None, slow=False)
    announce("slow", None, slow=True)
    heard: list[str] = []
    announce("slow, heard", heard.append, slow=True)
    announce("quick, heard", heard.append, slow=False)
    assert capsys.readouterr() == ("", "glovebox: slow\n")
    assert heard == ["slow, heard", "quick, heard"]
    context = BuildContext(sdk=ROOT / "guest", cache_dir=Path("unused"))
    context.step("quick")
    context.slow_step("slow again")
    assert capsys.readouterr() == ("", "glovebox: slow again\n")


def test_a_first_c_build_is_a_slow_step(tmp_path: Path) -> None:
    cold = zig_step(Path("tool.c"), tmp_path / "zig")
    assert cold == (
        f"zig cc: compiling tool.c; first build with this cache ({tmp_path / 'zig'}): Zig builds its WebAssembly"
        f" libc first, {ONCE}",
        True,
    )
    (tmp_path / "zig" / "h").mkdir(parents=True)
    assert zig_step(Path("tool.c"), tmp_path / "zig") == ("zig cc: compiling tool.c", False)


def test_componentize_py_says_so_off_a_terminal(tmp_path: Path) -> None:
    """The real command, stderr a pipe: the line comes before componentize-py runs (here it fails at once
    on the tool's import, which keeps the test short; the line is the same for a build that succeeds)."""
    pytest.importorskip("componentize_py")
    src = tmp_path / "bad.py"
    src.write_text(
        "import no_such_module_here\nfrom glovebox_guest import tool\n\n\n@tool\ndef f(n: int) -> int:\n"
        '    """Double n."""\n    return n * 2\n'
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "runtime"), os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, "-m", "glovebox", "--home", str(tmp_path / "home"), "build", str(src)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    first, second, *_ = done.stderr.splitlines()
    assert done.returncode == 1
    assert first == f"glovebox: componentize-py: bundling CPython with bad.py, {ONCE} per source"
    assert second == "error [build_failed]: componentize-py failed:"
    assert "No module named 'no_such_module_here'" in done.stderr
    quiet = subprocess.run([*argv[:3], "-q", *argv[3:]], capture_output=True, text=True, env=env, timeout=600)
    assert quiet.stderr.splitlines()[0] == "error [build_failed]: componentize-py failed:"
    assert glovebox.BuildError.code == "build_failed"
