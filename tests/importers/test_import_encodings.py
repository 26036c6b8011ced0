"""Request encodings of imported operations, each sent to a real HTTP server on 127.0.0.1:
application/x-www-form-urlencoded (Slack, Twilio, Stripe) and text/plain (GitHub's markdown/render-raw)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
import yaml

import glovebox

from ..capabilities.test_http import QuietHandler, in_thread


class EchoHandler(QuietHandler):
    """Answers every POST with what it received: the content type and the raw body."""

    server: EchoServer

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        seen = {"path": self.path, "type": self.headers.get("Content-Type"), "body": body}
        self.server.seen.append(seen)
        self._reply(200, json.dumps(seen).encode(), {"Content-Type": "application/json"})

    do_GET = do_POST


class EchoServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    seen: list[dict[str, Any]]


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    httpd = EchoServer(("127.0.0.1", 0), EchoHandler)
    httpd.seen = []
    with in_thread(httpd):
        yield httpd


def _spec(url: str) -> dict[str, Any]:
    ok = {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}}
    form = {
        "type": "object",
        "required": ["channel"],
        "properties": {
            "channel": {"type": "string"},
            "text": {"type": "string"},
            "count": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    }
    return {
        "openapi": "3.0.3",
        "info": {"title": "Slack Web API", "version": "1"},
        "servers": [{"url": url}],
        "paths": {
            "/chat.postMessage": {
                "post": {
                    "operationId": "chat_postMessage",
                    "requestBody": {
                        "required": True,
                        "content": {"application/x-www-form-urlencoded": {"schema": form}},
                    },
                    "responses": ok,
                }
            },
            "/markdown/raw": {
                "post": {
                    "operationId": "markdown/render-raw",
                    "requestBody": {"content": {"text/plain": {"schema": {"type": "string"}}}},
                    "responses": ok,
                }
            },
            "/projects/{project_gid}/tasks": {
                "get": {
                    "operationId": "getTasks",
                    "parameters": [
                        {
                            "name": "project_gid",
                            "in": "path",
                            "required": True,
                            "explode": False,
                            "schema": {"type": "string"},
                        },
                        {
                            "name": "opt_fields",
                            "in": "query",
                            "explode": False,
                            "schema": {"type": "array", "items": {"type": "string"}},
                        },
                        {
                            "name": "ids",
                            "in": "query",
                            "style": "spaceDelimited",
                            "explode": False,
                            "schema": {"type": "array", "items": {"type": "integer"}},
                        },
                        {
                            "name": "colors",
                            "in": "query",
                            "style": "pipeDelimited",
                            "explode": False,
                            "schema": {"type": "array", "items": {"type": "string"}},
                        },
                        {"name": "tag", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
                    ],
                    "responses": ok,
                }
            },
            "/upload": {
                "post": {
                    "operationId": "upload",
                    "requestBody": {"content": {"multipart/form-data": {"schema": {"type": "object"}}}},
                    "responses": ok,
                }
            },
        },
    }


@pytest.fixture
def slack(echo: EchoServer, tmp_path: Path) -> Iterator[glovebox.Runtime]:
    home = tmp_path / "home"
    with glovebox.Runtime(home=home) as rt:
        result = glovebox.import_openapi(rt, _spec(f"http://127.0.0.1:{echo.server_address[1]}/api"))
    assert result.api == "slack"
    assert sorted(result.added) == ["slack-chat_post-message", "slack-get-tasks", "slack-markdown-render-raw"]
    assert [skip["operation"] for skip in result.skipped] == ["upload"]
    assert "request bodies of multipart/form-data are not supported" in result.skipped[0]["reason"]
    policy = tmp_path / "policy.yaml"
    scopes = ["slack:read", "slack:write"]
    policy.write_text(yaml.safe_dump({**result.policy, "principals": {"agent": {"scopes": scopes}}}))
    policy.write_text(policy.read_text().replace("require_approval", "allow"))
    with glovebox.Runtime(home=home, policy=policy) as rt:
        yield rt


def test_a_form_body_is_sent_url_encoded(slack: glovebox.Runtime, echo: EchoServer) -> None:
    body = {"channel": "C1 general", "text": "héllo & bye=1", "count": 3, "tags": ["a", "b/c"]}
    result = slack.call("slack-chat_post-message", {"body": body}, principal="agent")
    assert result.ok, result.error
    seen = echo.seen[-1]
    assert seen["path"] == "/api/chat.postMessage"
    assert seen["type"] == "application/x-www-form-urlencoded"
    assert parse_qs(seen["body"], strict_parsing=True) == {
        "channel": ["C1 general"],
        "text": ["héllo & bye=1"],
        "count": ["3"],
        "tags": ["a", "b/c"],
    }
    assert seen["body"].startswith("channel=C1%20general&count=3&tags=a&tags=b%2Fc&text=")


def test_a_form_body_is_validated_as_its_schema(slack: glovebox.Runtime, echo: EchoServer) -> None:
    result = slack.call("slack-chat_post-message", {"body": {"text": "no channel"}}, principal="agent")
    assert result.error is not None and result.error.code == "invalid_input"
    assert echo.seen == []


def test_a_text_body_is_sent_as_it_is(slack: glovebox.Runtime, echo: EchoServer) -> None:
    text = '# Title\n\n"quoted" & <b>bold</b> é'
    result = slack.call("slack-markdown-render-raw", {"body": text}, principal="agent")
    assert result.ok, result.error
    assert echo.seen[-1]["type"] == "text/plain; charset=utf-8"
    assert echo.seen[-1]["body"] == text


def test_query_arrays_follow_their_style_and_explode(slack: glovebox.Runtime, echo: EchoServer) -> None:
    """Asana's explode: false (a scalar: no change; an array: one comma-joined value), spaceDelimited,
    pipeDelimited, and the default form style that repeats the name."""
    value = {
        "project_gid": "12.34",
        "opt_fields": ["name", "notes,x"],
        "ids": [1, 2],
        "colors": ["red", "blue"],
        "tag": ["a", "b"],
    }
    result = slack.call("slack-get-tasks", value, principal="agent")
    assert result.ok, result.error
    path, _, query = echo.seen[-1]["path"].partition("?")
    assert path == "/api/projects/12.34/tasks"
    assert query == "opt_fields=name,notes%2Cx&ids=1%202&colors=red%7Cblue&tag=a&tag=b"
    assert parse_qs(query) == {
        "opt_fields": ["name,notes,x"],
        "ids": ["1 2"],
        "colors": ["red|blue"],
        "tag": ["a", "b"],
    }
