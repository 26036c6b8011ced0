"""Request encodings of imported operations, each sent to a real HTTP server on 127.0.0.1 and the bytes it
received asserted: application/x-www-form-urlencoded (Slack, Twilio, Stripe's deepObject fields), text/plain
(GitHub's markdown/render-raw), multipart/form-data with file parts (Jira's attachments), raw binary bodies
(GitHub's release assets, Spotify's image/jpeg), and every parameter style and explode of OpenAPI 3."""

from __future__ import annotations

import base64
import email.parser
import email.policy
import json
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import pytest
import yaml

import glovebox

from ..capabilities.test_http import QuietHandler, in_thread


class EchoHandler(QuietHandler):
    """Answers every POST with what it received: the content type and the raw body."""

    server: EchoServer

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        seen = {"path": self.path, "type": self.headers.get("Content-Type"), "body": raw.decode(errors="replace")}
        self.server.seen.append({**seen, "raw": raw, "headers": dict(self.headers)})
        self._reply(200, json.dumps(seen).encode(), {"Content-Type": "application/json"})

    do_GET = do_PUT = do_POST


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
                    "requestBody": {
                        "content": {
                            "multipart/form-data": {
                                "schema": {
                                    "type": "object",
                                    "properties": {
                                        "title": {"type": "string"},
                                        "count": {"type": "integer"},
                                        "meta": {"type": "object"},
                                        "file": {"type": "string", "format": "binary"},
                                        "extra": {"type": "array", "items": {"type": "string", "format": "binary"}},
                                        "logo": {"type": "string"},
                                    },
                                },
                                "encoding": {"logo": {"contentType": "image/png"}},
                            }
                        }
                    },
                    "responses": ok,
                }
            },
            "/assets": {
                "post": {
                    "operationId": "upload-asset",
                    "requestBody": {"content": {"application/octet-stream": {"schema": {"type": "string"}}}},
                    "responses": ok,
                }
            },
            "/images": {
                "put": {
                    "operationId": "put-image",
                    "requestBody": {"content": {"image/*": {"schema": {"type": "string", "format": "binary"}}}},
                    "responses": ok,
                }
            },
            "/styles/{s}/{sx}/{so}/{sox}/{l}{lx}{lo}{lox}/{m}{mx}{mo}{mox}/{empty}": {
                "get": {
                    "operationId": "styles",
                    "parameters": [
                        *(
                            {"name": n, "in": "path", "required": True, "style": st, "explode": x, "schema": sc}
                            for prefix, st in (("s", "simple"), ("l", "label"), ("m", "matrix"))
                            for n, x, sc in (
                                (prefix, False, {"type": "array", "items": {"type": "string"}}),
                                (f"{prefix}x", True, {"type": "array", "items": {"type": "string"}}),
                                (f"{prefix}o", False, {"type": "object"}),
                                (f"{prefix}ox", True, {"type": "object"}),
                            )
                        ),
                        {
                            "name": "empty",
                            "in": "path",
                            "required": True,
                            "style": "matrix",
                            "schema": {"type": "string"},
                        },
                        {"name": "color", "in": "query", "schema": {"type": "object"}},
                        {"name": "shade", "in": "query", "explode": False, "schema": {"type": "object"}},
                        {
                            "name": "card",
                            "in": "query",
                            "style": "deepObject",
                            "explode": True,
                            "schema": {"type": "object"},
                        },
                        {
                            "name": "expand",
                            "in": "query",
                            "style": "deepObject",
                            "schema": {"type": "array", "items": {"type": "string"}},
                        },
                        {
                            "name": "spaced",
                            "in": "query",
                            "style": "spaceDelimited",
                            "explode": False,
                            "schema": {"type": "object"},
                        },
                        {"name": "next", "in": "query", "allowReserved": True, "schema": {"type": "string"}},
                        {
                            "name": "filter",
                            "in": "query",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        },
                        {"name": "X-Ids", "in": "header", "schema": {"type": "array", "items": {"type": "integer"}}},
                        {"name": "X-Rgb", "in": "header", "explode": True, "schema": {"type": "object"}},
                        {"name": "session", "in": "cookie", "schema": {"type": "string"}},
                        {
                            "name": "prefs",
                            "in": "cookie",
                            "explode": False,
                            "schema": {"type": "array", "items": {"type": "string"}},
                        },
                    ],
                    "responses": ok,
                }
            },
            "/files/{lab}{mat}/{parts}": {
                "get": {
                    "operationId": "files",
                    "parameters": [
                        {"name": "lab", "in": "path", "required": True, "style": "label", "schema": {"type": "string"}},
                        {
                            "name": "mat",
                            "in": "path",
                            "required": True,
                            "style": "matrix",
                            "schema": {"type": "string"},
                        },
                        {
                            "name": "parts",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "array", "items": {"type": "string"}},
                        },
                    ],
                    "responses": ok,
                }
            },
            "/feed": {
                "post": {
                    "operationId": "post-xml",
                    "requestBody": {"content": {"application/xml": {"schema": {"type": "string"}}}},
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
    assert sorted(result.added) == [
        "slack-chat_post-message",
        "slack-files",
        "slack-get-tasks",
        "slack-markdown-render-raw",
        "slack-post-xml",
        "slack-put-image",
        "slack-styles",
        "slack-upload",
        "slack-upload-asset",
    ]
    assert result.skipped == []
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


def _received(echo: EchoServer) -> dict[str, Any]:
    return echo.seen[-1]


def test_every_path_style_and_explode(slack: glovebox.Runtime, echo: EchoServer) -> None:
    """The OpenAPI 3 "Style Examples" table for path parameters: simple, label and matrix, exploded or not,
    arrays and objects; a value's own reserved characters are percent-encoded, the style's are not."""
    arr, obj = ["blue", "bl,ack"], {"R": 100, "G": "2;0"}
    value = {prefix + x: arr if not x.startswith("o") and "o" not in x else obj for prefix in "slm" for x in ("", "x")}
    value |= {prefix + x: obj for prefix in "slm" for x in ("o", "ox")}
    result = slack.call("slack-styles", {**value, "empty": ""}, principal="agent")
    assert result.ok, result.error
    path = _received(echo)["path"].partition("?")[0]
    assert path.split("/")[3:] == [
        "blue,bl%2Cack",  # simple
        "blue,bl%2Cack",  # simple, explode
        "R,100,G,2%3B0",  # simple object
        "R=100,G=2%3B0",  # simple object, explode
        ".blue.bl%2Cack.blue.bl%2Cack.R.100.G.2%3B0.R=100.G=2%3B0",  # label: array, exploded, object, exploded
        ";m=blue,bl%2Cack;mx=blue;mx=bl%2Cack;mo=R,100,G,2%3B0;R=100;G=2%3B0",  # matrix likewise
        ";empty",  # matrix, an empty string
    ]


def test_every_query_header_and_cookie_style(slack: glovebox.Runtime, echo: EchoServer) -> None:
    """form (an object exploded into its members, or one comma list), deepObject (Stripe's card[number],
    expand[0]), spaceDelimited objects, allowReserved, JSON content; header arrays and objects (simple, not
    percent-encoded); cookies in one Cookie header."""
    path = {prefix + x: ["a"] for prefix in "slm" for x in ("", "x")} | {
        prefix + x: {"k": "v"} for prefix in "slm" for x in ("o", "ox")
    }
    value = {
        **path,
        "empty": "e",
        "color": {"R": 100, "G": "a b"},
        "shade": {"R": 1, "G": 2},
        "card": {"number": "4242", "address": {"line1": "1 Main St"}, "tags": ["x", "y"]},
        "expand": ["customer", "invoice.subscription"],
        "spaced": {"a": 1, "b": 2},
        "next": "/a/b?c=d&e#f",
        "filter": {"a": [1, "x y"]},
        "X-Ids": [1, 2, 3],
        "X-Rgb": {"R": 1, "G": "a b"},
        "session": "abc 1",
        "prefs": ["x", "y"],
    }
    result = slack.call("slack-styles", value, principal="agent")
    assert result.ok, result.error
    seen = _received(echo)
    query = seen["path"].partition("?")[2]
    assert query.split("&") == [
        "R=100",
        "G=a%20b",
        "shade=R,1,G,2",
        "card%5Bnumber%5D=4242",
        "card%5Baddress%5D%5Bline1%5D=1%20Main%20St",
        "card%5Btags%5D%5B0%5D=x",
        "card%5Btags%5D%5B1%5D=y",
        "expand%5B0%5D=customer",
        "expand%5B1%5D=invoice.subscription",
        "spaced=a%201%20b%202",
        "next=/a/b?c%3Dd%26e%23f",
        "filter=" + quote(json.dumps(value["filter"]), safe=""),  # content: application/json, one value
    ]
    assert json.loads(parse_qs(query)["filter"][0]) == value["filter"]
    assert parse_qs(query)["card[address][line1]"] == ["1 Main St"]
    assert seen["headers"]["X-Ids"] == "1,2,3"
    assert seen["headers"]["X-Rgb"] == "R=1,G=a b"
    assert seen["headers"]["Cookie"] == "session=abc%201; prefs=x,y"


def test_a_form_body_follows_its_encoding_styles(tmp_path: Path, echo: EchoServer) -> None:
    """Stripe's form bodies: a field whose encoding says deepObject is sent as metadata[key]=value."""
    spec = _spec(f"http://127.0.0.1:{echo.server_address[1]}/api")
    body = spec["paths"]["/chat.postMessage"]["post"]["requestBody"]["content"]["application/x-www-form-urlencoded"]
    body["schema"]["properties"] |= {"metadata": {"type": "object"}, "flat": {"type": "object"}}
    body["encoding"] = {"metadata": {"style": "deepObject", "explode": True}, "tags": {"explode": False}}
    with glovebox.Runtime(home=tmp_path / "home") as rt:
        result = glovebox.import_openapi(rt, spec, include=["chat_postMessage"])
        operation = rt.tool(result.added[0]).manifest.operation
    assert operation is not None and operation.body_styles["metadata"].style == "deepObject"
    rt = _allowing(tmp_path, result)
    with rt:
        form = {"channel": "c", "metadata": {"order": "6735", "a b": "x"}, "tags": ["a", "b"], "flat": {"k": 1}}
        answer = rt.call(result.added[0], {"body": form}, principal="agent")
    assert answer.ok, answer.error
    assert _received(echo)["body"] == ("channel=c&k=1&metadata%5Border%5D=6735&metadata%5Ba%20b%5D=x&tags=a,b")


def _allowing(tmp_path: Path, result: glovebox.ImportResult) -> glovebox.Runtime:
    policy = tmp_path / "allow.yaml"
    document = {**result.policy, "principals": {"agent": {"scopes": ["slack:read", "slack:write"]}}}
    policy.write_text(yaml.safe_dump(document).replace("require_approval", "allow"))
    return glovebox.Runtime(home=tmp_path / "home", policy=policy)


def test_a_multipart_body_sends_fields_and_files(slack: glovebox.Runtime, echo: EchoServer) -> None:
    """Jira's attachments: text fields as text parts, an object as JSON, a file part from base64 (any
    bytes) or from text, an array of files as repeated parts, a part typed by its encoding."""
    png = bytes(range(256))
    body = {
        "title": 'Q3 "report"',
        "count": 2,
        "meta": {"a": [1]},
        "file": {"base64": base64.b64encode(png).decode(), "filename": "r.bin", "content_type": "image/png"},
        "extra": [{"text": "one\r\n"}, {"text": "é", "filename": "two.txt", "content_type": "text/plain"}],
        "logo": {"base64": base64.urlsafe_b64encode(b"\xff\xfe").decode().rstrip("=")},
    }
    result = slack.call("slack-upload", {"body": body}, principal="agent")
    assert result.ok, result.error
    seen = _received(echo)
    kind, _, boundary = seen["type"].partition("; boundary=")
    assert kind == "multipart/form-data" and boundary.startswith("glovebox-")
    b = boundary.encode()
    assert (
        seen["raw"]
        == b"".join(
            [
                b"--" + b + b'\r\nContent-Disposition: form-data; name="title"\r\n\r\nQ3 "report"\r\n',
                b"--" + b + b'\r\nContent-Disposition: form-data; name="count"\r\n\r\n2\r\n',
                b"--" + b + b'\r\nContent-Disposition: form-data; name="meta"\r\nContent-Type: application/json'
                b"\r\n\r\n" + json.dumps(body["meta"]).encode() + b"\r\n",  # the input's JSON text
                b"--" + b + b'\r\nContent-Disposition: form-data; name="file"; filename="r.bin"\r\n'
                b"Content-Type: image/png\r\n\r\n" + png + b"\r\n",
                b"--" + b + b'\r\nContent-Disposition: form-data; name="extra"; filename="extra"\r\n'
                b"Content-Type: application/octet-stream\r\n\r\none\r\n\r\n",
                b"--" + b + b'\r\nContent-Disposition: form-data; name="extra"; filename="two.txt"\r\n'
                b"Content-Type: text/plain\r\n\r\n" + "é".encode() + b"\r\n",
                b"--" + b + b'\r\nContent-Disposition: form-data; name="logo"; filename="logo"\r\n'
                b"Content-Type: application/octet-stream\r\n\r\n\xff\xfe\r\n",
                b"--" + b + b"--\r\n",
            ]
        )
    )
    # what a server's multipart parser makes of it
    parsed = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + seen["type"].encode() + b"\r\n\r\n" + seen["raw"]
    )
    parts = {
        part.get_param("filename", header="content-disposition")
        or part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
        for part in parsed.iter_parts()
    }
    assert parts["r.bin"] == png and parts["title"] == b'Q3 "report"'


def test_a_multipart_boundary_never_occurs_in_a_part(slack: glovebox.Runtime, echo: EchoServer) -> None:
    """A file that contains the boundary the content would first derive still gets a boundary of its own."""
    first = slack.call("slack-upload", {"body": {"title": "x"}}, principal="agent")
    assert first.ok, first.error
    boundary = _received(echo)["type"].partition("boundary=")[2]
    # the same content hash cannot be had with the boundary inside, so the hostile text holds many candidates
    text = "\r\n".join(f"--{boundary}" for _ in range(3))
    result = slack.call("slack-upload", {"body": {"title": text}}, principal="agent")
    assert result.ok, result.error
    chosen = _received(echo)["type"].partition("boundary=")[2]
    assert _received(echo)["raw"].count(f"--{chosen}".encode()) == 2


def test_a_multipart_file_with_bad_base64_is_refused(slack: glovebox.Runtime, echo: EchoServer) -> None:
    result = slack.call("slack-upload", {"body": {"file": {"base64": "not base64!"}}}, principal="agent")
    assert result.error is not None and result.error.code == "guest_error"
    assert "base64" in result.error.message
    assert echo.seen == []


def test_a_file_part_takes_base64_or_text_not_both(slack: glovebox.Runtime, echo: EchoServer) -> None:
    result = slack.call("slack-upload", {"body": {"file": {"base64": "", "text": ""}}}, principal="agent")
    assert result.error is not None and result.error.code == "invalid_input"


def test_a_binary_body_is_sent_as_its_bytes(slack: glovebox.Runtime, echo: EchoServer) -> None:
    """GitHub's release assets (application/octet-stream) and Spotify's image upload (image/*: sent as
    application/octet-stream, a range being no Content-Type)."""
    data = bytes(range(255, -1, -1)) * 3
    result = slack.call("slack-upload-asset", {"body": base64.b64encode(data).decode()}, principal="agent")
    assert result.ok, result.error
    assert _received(echo)["raw"] == data
    assert _received(echo)["type"] == "application/octet-stream"
    result = slack.call("slack-put-image", {"body": base64.b64encode(b"\xff\xd8\xff").decode()}, principal="agent")
    assert result.ok, result.error
    assert _received(echo)["raw"] == b"\xff\xd8\xff"
    tool = slack.tool("slack-put-image").manifest
    assert isinstance(tool.input_schema, dict)
    assert tool.input_schema["properties"]["body"]["contentEncoding"] == "base64"


def test_an_xml_body_is_text_with_its_media_type(slack: glovebox.Runtime, echo: EchoServer) -> None:
    result = slack.call("slack-post-xml", {"body": "<a>é</a>"}, principal="agent")
    assert result.ok, result.error
    assert _received(echo)["type"] == "application/xml"
    assert _received(echo)["raw"] == "<a>é</a>".encode()


def test_path_styles_keep_unreserved_characters_and_the_dot_segment_defence(
    slack: glovebox.Runtime, echo: EchoServer
) -> None:
    """Unreserved characters are sent as they are in every style; whatever a style's own delimiters make of a
    value (a label's '.', a matrix's ';'), a dot segment, '..;', an encoded separator or a twice-encoded dot is
    refused by the host before any request leaves, even for the rule that allows ';' parameters."""
    fine = slack.call(
        "slack-files", {"lab": "v1.2~x", "mat": "a_b-c", "parts": ["next.js", "READ ME.md"]}, principal="agent"
    )
    assert fine.ok, fine.error
    assert _received(echo)["path"] == "/api/files/.v1.2~x;mat=a_b-c/next.js,READ%20ME.md"
    tool = slack.tool("slack-files").manifest
    assert tool.capabilities.http[0].allow_path_params is True  # matrix style: this tool's rule alone
    assert slack.tool("slack-get-tasks").manifest.capabilities.http[0].allow_path_params is False
    attacks = [
        ({"lab": ".", "mat": "", "parts": ["x"]}, "..;mat"),  # Tomcat reads '..;' as '..'
        ({"lab": "", "mat": "x", "parts": [".."]}, "/.."),  # a dot segment from an array
        ({"lab": "", "mat": "x", "parts": ["."]}, "/."),
        ({"lab": "", "mat": "x", "parts": ["%2e%2e"]}, "%252e%252e"),  # twice decoded
        ({"lab": "", "mat": "x", "parts": ["a/b"]}, "a%2Fb"),  # an encoded separator
        ({"lab": "", "mat": "x", "parts": ["a\\b"]}, "a%5Cb"),
        ({"lab": "%2F", "mat": "x", "parts": ["x"]}, ".%252F"),  # an encoded separator, encoded again
        ({"lab": ".%2e", "mat": "x", "parts": ["x"]}, "..%252e"),
        ({"lab": "", "mat": "..", "parts": ["x"]}, ".;mat=.."),  # '.' before ';': a dot segment to Tomcat
        ({"lab": "v", "mat": "..", "parts": ["x"]}, ";mat=.."),  # harmless: not a segment of its own
    ]
    sent = len(echo.seen)
    for value, shape in attacks[:-1]:
        refused = slack.call("slack-files", value, principal="agent")
        assert refused.error is not None and refused.error.code == "capability_denied", (value, refused)
        assert shape in refused.error.message, (shape, refused.error.message)
    assert len(echo.seen) == sent  # nothing reached the server
    harmless = slack.call("slack-files", attacks[-1][0], principal="agent")
    assert harmless.ok, harmless.error
    assert _received(echo)["path"] == "/api/files/.v;mat=../x"
