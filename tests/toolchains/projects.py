"""What the Rust and Go tool tests share: a JSON server on 127.0.0.1 and the Runtime granted to reach it."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import glovebox

from ..capabilities.test_http import QuietHandler, _Server, in_thread
from ..guestcache import project_env


class _Items(QuietHandler):
    """Answers every GET with a JSON document naming the path it was asked for."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._reply(
            200, json.dumps({"items": [1, 2, 3], "path": self.path}).encode(), {"Content-Type": "application/json"}
        )


@dataclass(frozen=True)
class JsonServer:
    port: int

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def rule(self) -> dict[str, Any]:
        """The HTTP grant that lets a tool GET anything from this server (and nothing else)."""
        return {
            "host": "127.0.0.1", "schemes": ["http"], "ports": [self.port], "methods": ["GET"],
            "paths": ["/**"], "allow_private": True,
        }  # fmt: skip


@contextmanager
def json_server() -> Iterator[JsonServer]:
    httpd = _Server(("127.0.0.1", 0), _Items)
    httpd.seen, httpd.release = [], None  # type: ignore[assignment]
    with in_thread(httpd):
        yield JsonServer(httpd.server_address[1])


def granted_runtime(home: Path, server: JsonServer, wasm: Path) -> glovebox.Runtime:
    """A Runtime granted ``server``, holding ``wasm`` under its manifest (beside it) declaring the same rule."""
    rt = glovebox.Runtime(home=home, grants={"http": [server.rule()]})
    manifest = tomllib.loads(wasm.with_name(wasm.stem + ".glovebox.toml").read_text())
    rt.register(wasm, manifest={**manifest, "capabilities": {"http": [server.rule()]}})
    return rt


@pytest.fixture
def shared_caches(cache_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Builds in the test itself use the cargo and Go caches the cached builds use (warm after the first)."""
    for name, value in project_env(cache_root).items():
        monkeypatch.setenv(name, value)
