"""`glovebox demo` builds the examples and every scenario ends as it says it will."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from glovebox.cli._main import cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # builds and runs every example
@pytest.mark.system
def test_demo_runs_every_scenario() -> None:
    result = CliRunner().invoke(cli, ["demo"])
    assert result.exit_code == 0, result.output
    for code in ("invalid_input", "guest_error", "fuel_exhausted", "memory_limit", "timeout", "capability_denied"):
        assert code in result.output
    for code in ("permission_denied", "approval_required"):
        assert code in result.output
    assert "ts-text-stats" in result.output and "ts-weather" in result.output
    assert "hash chain intact" in result.output
    assert '"delete the test data" as DROP TABLE' in result.output and "capability_denied" in result.output
    assert "the table is intact" in result.output
    assert "Every scenario ended as expected" in result.output


@pytest.mark.slow  # builds and runs every example, in a process of its own
@pytest.mark.system
def test_demo_runs_with_the_build_extra_alone(tmp_path: Path) -> None:
    """The README's extras table says `build` is what `glovebox demo` needs: without `sql` it leaves SQL out."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text('import sys\nsys.modules["sqlglot"] = None  # as without the sql extra\n')
    path = os.pathsep.join(p for p in (str(shim), str(ROOT / "runtime"), os.environ.get("PYTHONPATH")) if p)
    result = subprocess.run(
        [sys.executable, "-m", "glovebox", "demo"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": path},
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "The SQL part is left out: it needs the sql extra (pip install 'glovebox-runtime[sql]')." in result.stdout
    assert "Every scenario ended as expected" in result.stdout
