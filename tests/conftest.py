"""Shared fixtures: an isolated GLOVEBOX_HOME per test, and guests built from source."""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
import tomllib
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


def _sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


#: The servers' test policy: agent (key "agent-key") may call text-stats, calc
#: and primes; outsider (key "outsider-key") may call text-stats only, but lacks
#: its scope; everything else is blocked.
SERVER_POLICY = f"""
version: 1
principals:
  agent:
    scopes: [text:read]
    api_key_sha256: [{_sha("agent-key")}]
  outsider:
    scopes: []
    api_key_sha256: [{_sha("outsider-key")}]
defaults:
  action: block
rules:
  - tool: text-stats
    action: allow
  - tool: calc
    principals: [agent]
    action: allow
  - tool: primes
    principals: [agent]
    action: allow
"""


@pytest.fixture
def server_home(tmp_path: Path, build_example: Callable[[str], Path]) -> tuple[Path, Path]:
    """A home with text-stats (requiring text:read), calc and stress registered, and SERVER_POLICY."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(SERVER_POLICY)
    home = tmp_path / "home"
    with glovebox.Runtime(home=home, policy=policy) as rt:
        manifest = tomllib.loads((EXAMPLES / "text-stats" / "glovebox.toml").read_text())
        manifest["required_scopes"] = ["text:read"]
        rt.register(build_example("text-stats"), manifest)
        rt.register(build_example("calc"))
        rt.register(build_example("stress"))
    return home, policy


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def serve_app() -> Iterator[Callable[[object], str]]:
    """Serve an ASGI app with a real uvicorn on 127.0.0.1 (a thread); returns its base URL."""
    import uvicorn

    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def _serve(app: object) -> str:
        port = _free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", backlog=4096)  # type: ignore[arg-type]
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        servers.append((server, thread))
        deadline = time.monotonic() + 10
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        return f"http://127.0.0.1:{port}"

    yield _serve
    for server, thread in servers:
        server.should_exit = True
        thread.join(10)
