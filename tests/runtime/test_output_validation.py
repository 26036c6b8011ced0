"""Output validation: ``enforce | warn | off``, per manifest and per policy guard, on imported operations
run against a real server on 127.0.0.1 whose answers miss the spec's own output schemas.

An imported operation warns by default: the call answers ok, the mismatch in
``meta.warnings`` and in the audit row. Under ``enforce`` a mismatch is
``invalid_output``, and a call whose write reached the server says so in
``details.effects: "committed"`` (the write is never hidden, never repeated).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import glovebox

from ..capabilities.test_http import QuietHandler, in_thread


class ThingHandler(QuietHandler):
    server: ThingServer

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.seen.append((self.command, self.path))
        if self.command == "GET":  # the spec promises a name; the server leaves it out
            self._json(200, {"id": 1})
        else:  # the spec promises an integer id; the server answers a string
            self._json(201, {"id": "t-1", **json.loads(body or b"{}")})

    def _json(self, status: int, value: Any) -> None:
        self._reply(status, json.dumps(value).encode(), {"Content-Type": "application/json"})

    do_GET = do_POST = _handle


class ThingServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    seen: list[tuple[str, str]]


THING = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
    "required": ["id", "name"],
}


def _spec(url: str) -> dict[str, Any]:
    answer = {"content": {"application/json": {"schema": THING}}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "things", "version": "1.0.0"},
        "servers": [{"url": url}],
        "paths": {
            "/things/{id}": {
                "get": {
                    "operationId": "getThing",
                    "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}],
                    "responses": {"200": {"description": "a thing", **answer}},
                }
            },
            "/things": {
                "post": {
                    "operationId": "createThing",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    "responses": {"201": {"description": "made", **answer}},
                }
            },
        },
    }


@pytest.fixture
def things() -> Iterator[ThingServer]:
    httpd = ThingServer(("127.0.0.1", 0), ThingHandler)
    httpd.seen = []
    with in_thread(httpd):
        yield httpd


@pytest.fixture
def home(tmp_path: Path, things: ThingServer) -> tuple[Path, dict[str, Any]]:
    """A home with the things API imported; its fragment's grants."""
    home = tmp_path / "home"
    with glovebox.Runtime(home=home) as rt:
        result = glovebox.import_openapi(rt, _spec(f"http://127.0.0.1:{things.server_address[1]}"), name="things")
    assert sorted(result.added) == ["things-create-thing", "things-get-thing"]
    return home, result.policy


def _runtime(home: tuple[Path, dict[str, Any]], *guards: dict[str, Any], outputs: bool = False) -> glovebox.Runtime:
    path, fragment = home
    grants = [
        {**grant, "http": [{**rule, "allow_private": True} for rule in grant["http"]]} for grant in fragment["grants"]
    ]
    policy = {
        "version": 1,
        "defaults": {"action": "allow"},
        "principals": {"agent": {"scopes": ["things:read", "things:write"]}},
        "grants": grants,
        "guards": list(guards),
        "audit": {"store_outputs": outputs},
    }
    return glovebox.Runtime(home=path, policy=glovebox.Policy.model_validate(policy))


def _audit_row(rt: glovebox.Runtime, call_id: str) -> dict[str, Any]:
    (row,) = [row for row in rt.audit.tail(100) if row["call_id"] == call_id]
    return {**row, "egress": json.loads(row["egress"])}


def test_an_imported_read_warns_by_default_and_answers_the_output(home: tuple[Path, dict[str, Any]]) -> None:
    with _runtime(home) as rt:
        result = rt.call("things-get-thing", {"id": 1}, principal="agent")
        row = _audit_row(rt, result.meta["call_id"])
    assert result.ok, result.to_dict()
    assert result.output == {"id": 1}
    [warning] = result.meta["warnings"]
    assert warning["code"] == "invalid_output"
    assert warning["details"] == {"path": "/", "schema_path": "/required"}
    assert '"name" is a required property' in warning["message"]
    assert row["outcome"] == "ok"
    assert row["egress"]["warnings"] == [{"code": "invalid_output", "details": warning["details"]}]  # no message


def test_the_audit_keeps_the_message_where_it_keeps_outputs(home: tuple[Path, dict[str, Any]]) -> None:
    with _runtime(home, outputs=True) as rt:
        result = rt.call("things-get-thing", {"id": 1}, principal="agent")
        row = _audit_row(rt, result.meta["call_id"])
    assert row["egress"]["warnings"] == result.meta["warnings"]


def test_an_imported_write_that_warns_answers_what_the_server_did(
    home: tuple[Path, dict[str, Any]], things: ThingServer
) -> None:
    with _runtime(home) as rt:
        result = rt.call("things-create-thing", {"body": {"name": "lamp"}}, principal="agent")
    assert result.ok and result.output == {"id": "t-1", "name": "lamp"}, result.to_dict()
    assert result.meta["warnings"][0]["details"]["path"] == "/id"
    assert things.seen == [("POST", "/things")]


def test_an_enforced_write_says_it_was_committed(home: tuple[Path, dict[str, Any]], things: ThingServer) -> None:
    with _runtime(home, {"tool": "things-*", "output_validation": "enforce"}) as rt:
        write = rt.call("things-create-thing", {"body": {"name": "lamp"}}, principal="agent")
        read = rt.call("things-get-thing", {"id": 1}, principal="agent")
        row = _audit_row(rt, write.meta["call_id"])
    assert write.code == "invalid_output", write.to_dict()
    assert write.error.details["effects"] == "committed" and write.error.details["path"] == "/id"
    assert write.error.retryable is False
    assert read.code == "invalid_output" and "effects" not in read.error.details  # a read changed nothing
    assert things.seen == [("POST", "/things"), ("GET", "/things/1")]  # the write ran once, never again
    assert row["outcome"] == "invalid_output"


def test_off_skips_the_check_and_the_first_matching_guard_wins(home: tuple[Path, dict[str, Any]]) -> None:
    guards = ({"tool": "things-get-*", "output_validation": "off"}, {"tool": "*", "output_validation": "enforce"})
    with _runtime(home, *guards) as rt:
        read = rt.call("things-get-thing", {"id": 1}, principal="agent")
        write = rt.call("things-create-thing", {"body": {}}, principal="agent")
    assert read.ok and "warnings" not in read.meta, read.to_dict()
    assert write.code == "invalid_output"


def test_the_manifest_sets_it_and_a_wasm_tool_still_enforces(tmp_path: Path, build_guest: Any) -> None:
    schema = {"type": "object", "properties": {"text": {"type": "integer"}}}
    with glovebox.Runtime(home=tmp_path / "home") as rt:
        echo = build_guest("echo")
        rt.register(echo, manifest={"name": "strict", "output_schema": schema})
        rt.register(echo, manifest={"name": "lenient", "output_schema": schema, "output_validation": "warn"})
        strict = rt.call("strict", {"text": "x"})
        lenient = rt.call("lenient", {"text": "x"})
        kept = rt.tool("lenient").manifest
        plain = rt.tool("strict").manifest
    assert strict.code == "invalid_output" and "effects" not in strict.error.details
    assert lenient.ok and lenient.meta["warnings"][0]["details"]["path"] == "/text", lenient.to_dict()
    assert kept.output_validation == "warn" and '"output_validation":"warn"' in kept.to_json()
    assert "output_validation" not in plain.to_json()  # unset: the signed text of older manifests is unchanged


def test_a_check_that_refuses_a_write_says_it_was_committed(
    home: tuple[Path, dict[str, Any]], things: ThingServer
) -> None:
    guard = {"tool": "things-*", "checks": {"forbidden_patterns": ["lamp"]}}
    with _runtime(home, guard) as rt:
        write = rt.call("things-create-thing", {"body": {"name": "lamp"}}, principal="agent")
        read = rt.call("things-get-thing", {"id": 1}, principal="agent")
    assert write.code == "evaluation_failed", write.to_dict()
    assert write.error.details["effects"] == "committed"
    assert read.ok and read.meta["warnings"], read.to_dict()  # passes the check; still warns on its schema
    assert things.seen == [("POST", "/things"), ("GET", "/things/1")]
