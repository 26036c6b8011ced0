"""The first hour of a tool author and an operator, through the real CLI.

Each test is a wall a new user hit: a home that is a file, an approval message
whose command did not work, a manifest that did not do what the README says, an
error in another voice. Commands run through click's ``CliRunner`` (tracebacks
fail the test) or, where a terminal or a real build matters, a subprocess.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import glovebox
from glovebox.cli._main import cli

ROOT = Path(__file__).resolve().parents[2]


def invoke(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input, prog_name="glovebox", catch_exceptions=False, env=env)


# -- homes that cannot surprise ------------------------------------------------------


def test_home_that_is_a_file_is_one_clear_error(tmp_path: Path) -> None:
    somefile = tmp_path / "somefile"
    somefile.write_text("")
    result = invoke("tools", env={"GLOVEBOX_HOME": str(somefile)})
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == f"error [io_error]: the glovebox home {somefile} is a file, not a directory\n"


def test_home_under_a_file_is_one_clear_error(tmp_path: Path) -> None:
    somefile = tmp_path / "somefile"
    somefile.write_text("")
    for command in (["tools"], ["keys", "list"], ["audit", "tail"]):
        result = invoke("--home", str(somefile / "sub"), *command)
        assert result.exit_code == 1, command
        assert result.stderr == (
            f"error [io_error]: the glovebox home {somefile / 'sub'} cannot be made: {somefile} is a file\n"
        ), command


def test_library_refuses_a_home_that_is_a_file(tmp_path: Path) -> None:
    somefile = tmp_path / "somefile"
    somefile.write_text("")
    with pytest.raises(NotADirectoryError, match=f"the glovebox home {somefile} is a file"):
        glovebox.Runtime(home=somefile)
    with pytest.raises(NotADirectoryError, match=f"cannot be made: {somefile} is a file"):
        glovebox.Runtime(home=somefile / "deeper" / "sub")


def test_a_bad_policy_creates_nothing_in_a_new_home(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 9\n")
    home = tmp_path / "new-home"
    result = invoke("--home", str(home), "--policy", str(bad), "tools")
    assert result.exit_code == 1
    assert result.stderr.startswith("error [invalid_policy]: invalid policy ")
    assert not home.exists()
    with pytest.raises(glovebox.InvalidPolicy):
        glovebox.Runtime(home=home, policy=bad)
    with pytest.raises(glovebox.InvalidGrants):
        glovebox.Runtime(home=home, grants={"http": {"nonsense": 1}})
    assert not home.exists()


def test_c_build_keeps_zig_cache_in_the_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cold Zig cache: this build takes tens of seconds, and writes nothing to ~/.cache/zig."""
    pytest.importorskip("ziglang")
    monkeypatch.delenv("ZIG_GLOBAL_CACHE_DIR", raising=False)
    home = tmp_path / "home"
    src = tmp_path / "tool.c"
    src.write_text((ROOT / "tests" / "guests" / "echo.c").read_text())
    result = invoke("--home", str(home), "build", str(src))
    assert result.exit_code == 0, result.stderr
    assert (home / "cache" / "zig").is_dir()
    assert any((home / "cache" / "zig").iterdir())
