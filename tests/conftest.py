"""Shared fixtures: an isolated GLOVEBOX_HOME per test, and guests built from source."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import glovebox

ROOT = Path(__file__).resolve().parents[1]
GUESTS = ROOT / "tests" / "guests"
EXAMPLES = ROOT / "guest" / "examples"

# Guest sources are built into components, never imported on the host.
collect_ignore_glob = ["guests/*.py"]


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No GLOVEBOX_* variable leaks in; GLOVEBOX_HOME is a fresh tmp dir."""
    for key in list(os.environ):
        if key.startswith("GLOVEBOX_"):
            monkeypatch.delenv(key)
    home = tmp_path / "home"
    monkeypatch.setenv("GLOVEBOX_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("built")


@pytest.fixture(scope="session")
def build_guest(build_dir: Path) -> Callable[[str], Path]:
    """Build ``tests/guests/<name>.c`` once per session; return the component path."""
    built: dict[str, Path] = {}

    def _build(name: str) -> Path:
        if name not in built:
            built[name] = glovebox.build(GUESTS / f"{name}.c", build_dir / "guests" / f"{name}.wasm")
        return built[name]

    return _build


@pytest.fixture(scope="session")
def build_example(build_dir: Path) -> Callable[[str], Path]:
    """Build ``guest/examples/<name>/tool.c`` once per session (manifest copied beside it)."""
    built: dict[str, Path] = {}

    def _build(name: str) -> Path:
        if name not in built:
            built[name] = glovebox.build(EXAMPLES / name / "tool.c", build_dir / "examples" / f"{name}.wasm")
        return built[name]

    return _build


@pytest.fixture
def runtime(_isolated_env: Path) -> Iterator[glovebox.Runtime]:
    with glovebox.Runtime(home=_isolated_env) as rt:
        yield rt
