"""Settings from the environment: read in one module, explicit values always win."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import glovebox
from glovebox.core import _settings

PACKAGE = Path(__file__).resolve().parents[2] / "runtime" / "glovebox"


def test_home_explicit_then_env_then_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLOVEBOX_HOME", str(tmp_path / "env"))
    assert _settings.home_dir(tmp_path / "given") == tmp_path / "given"
    assert _settings.home_dir() == tmp_path / "env"
    monkeypatch.setenv("GLOVEBOX_HOME", "")  # empty counts as unset
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert _settings.home_dir() == tmp_path / "data" / "glovebox"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert _settings.home_dir() == tmp_path / "user" / ".local" / "share" / "glovebox"
    assert _settings.trusted_keys_dir(tmp_path / "given") == tmp_path / "given" / "trusted_keys"


def test_build_cache_follows_the_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLOVEBOX_HOME", str(tmp_path / "env"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _settings.build_cache_dir(tmp_path / "given") == tmp_path / "given" / "cache" / "build"
    assert _settings.build_cache_dir() == tmp_path / "env" / "cache" / "build"
    monkeypatch.delenv("GLOVEBOX_HOME")
    assert _settings.build_cache_dir() == tmp_path / "xdg" / "glovebox" / "build"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert _settings.build_cache_dir() == tmp_path / "user" / ".cache" / "glovebox" / "build"


def test_toolchain_cache_dir_is_per_user_not_per_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLOVEBOX_TOOLCHAINS", str(tmp_path / "chains"))
    monkeypatch.setenv("GLOVEBOX_HOME", str(tmp_path / "env"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _settings.toolchain_cache_dir() == tmp_path / "chains"
    monkeypatch.setenv("GLOVEBOX_TOOLCHAINS", "")  # empty counts as unset; GLOVEBOX_HOME plays no part
    assert _settings.toolchain_cache_dir() == tmp_path / "xdg" / "glovebox" / "toolchains"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert _settings.toolchain_cache_dir() == tmp_path / "user" / ".cache" / "glovebox" / "toolchains"


def test_files_and_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _settings.policy_file() is None and _settings.grants_file() is None
    assert _settings.require_signatures() is False
    monkeypatch.setenv("GLOVEBOX_POLICY", str(tmp_path / "p.yaml"))
    monkeypatch.setenv("GLOVEBOX_GRANTS", str(tmp_path / "g.toml"))
    assert _settings.policy_file() == tmp_path / "p.yaml"
    assert _settings.grants_file() == tmp_path / "g.toml"
    for value, expected in (("1", True), (" Yes ", True), ("on", True), ("0", False), ("no", False), ("", False)):
        monkeypatch.setenv("GLOVEBOX_REQUIRE_SIGNATURES", value)
        assert _settings.require_signatures() is expected, value


def test_runtime_takes_its_defaults_from_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLOVEBOX_HOME", str(tmp_path / "env-home"))
    monkeypatch.setenv("GLOVEBOX_REQUIRE_SIGNATURES", "true")
    with glovebox.Runtime() as rt:
        assert rt.home == tmp_path / "env-home" and rt.require_signatures is True
        assert rt.trusted_keys_dir == tmp_path / "env-home" / "trusted_keys"
    with glovebox.Runtime(home=tmp_path / "given", require_signatures=False) as rt:
        assert rt.home == tmp_path / "given" and rt.require_signatures is False


def _environment_readers() -> set[str]:
    """Modules that touch ``os.environ`` or ``os.getenv``."""
    readers = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv"):
                readers.add(path.relative_to(PACKAGE).as_posix())
    return readers


def test_only_the_settings_module_reads_the_environment() -> None:
    # The env secret provider reads the secrets a policy grants (data, not settings), and the
    # exec provider hands a command the variables its reference names; _toolchain hands
    # the environment to the compilers it runs.
    assert _environment_readers() == {
        "core/_settings.py",
        "capabilities/_providers.py",
        "capabilities/_execsecret.py",
        "toolchains/_binaries.py",
    }
