"""A small imported API on 127.0.0.1 that fails N times then recovers, for the guards' tests.

``FlakyServer`` counts every request it gets (``hits``) and answers 500 while
``fail_left`` is above 0. The fixtures (in ``tests/conftest.py``) import the
API once per module (a read, ``flaky-get-item``, and a write,
``flaky-add-item``) and copy that home for each test.
"""

from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from .capabilities.test_http import QuietHandler

SPEC: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "Flaky", "version": "1.0.0"},
    "servers": [{"url": "http://127.0.0.1/"}],
    "paths": {
        "/items/{id}": {
            "get": {
                "operationId": "getItem",
                "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "the item", "content": {"application/json": {"schema": {}}}}},
            }
        },
        "/items": {
            "post": {
                "operationId": "addItem",
                "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
                "responses": {"200": {"description": "added", "content": {"application/json": {"schema": {}}}}},
            }
        },
    },
}


class FlakyHandler(QuietHandler):
    server: FlakyServer

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        with self.server.lock:
            self.server.hits.append(f"{self.command} {self.path}")
            failing = self.server.fail_left > 0
            self.server.fail_left -= 1
        if failing:
            self._reply(500, b'{"error": "down"}', {"Content-Type": "application/json"})
        else:
            self._reply(200, json.dumps({"ok": self.path}).encode(), {"Content-Type": "application/json"})

    do_GET = do_POST = _handle


class FlakyServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    hits: list[str]
    fail_left: int
    lock: threading.Lock


def write_policy(path: Path, fragment: dict[str, Any], guards: list[dict[str, Any]], rules: Any = None) -> Path:
    principals = {"anonymous": {"scopes": ["flaky:read", "flaky:write"]}, **fragment.get("principals", {})}
    rules = rules or [{"tool": "flaky-*", "action": "allow"}]
    document = {**fragment, "principals": principals, "rules": rules, "guards": guards}
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path
