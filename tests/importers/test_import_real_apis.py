"""Stripe's, Slack's and Kubernetes' published OpenAPI descriptions and the Swagger 2.0 Petstore, imported
from the copies under tests/data/realapis/ (trimmed with its trim.py; licences in its README), and their
operations called against a local server on 127.0.0.1 that answers each description's own examples (or,
where it has none, an instance of the response schema built from its required properties). Each call's
request is asserted byte for byte: deepObject queries and form fields (Stripe), form bodies and header
tokens (Slack), a parameter name used in two places, text and binary answers and a merge-patch body
(Kubernetes), collectionFormat,
formData and a file upload (Swagger 2.0)."""

from __future__ import annotations

import base64
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

DATA = Path(__file__).parents[1] / "data" / "realapis"
#: An answer that is neither JSON nor text (every byte value, so no encoding could pass for UTF-8).
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


def _load(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text())


def _resolve(doc: dict[str, Any], node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        target: Any = doc
        for part in node["$ref"][2:].split("/"):
            target = target[part]
        node = target
    return node


def instance(doc: dict[str, Any], schema: Any, depth: int = 0) -> Any:
    """A value of ``schema``: its example, else built from its required properties."""
    schema = _resolve(doc, schema)
    if not isinstance(schema, dict) or depth > 12:
        return None
    if "example" in schema:
        return schema["example"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return instance(doc, schema[key][0], depth + 1)
    if "allOf" in schema:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            merged |= instance(doc, part, depth + 1) or {}
        return merged
    kind = schema.get("type", "object" if "properties" in schema else None)
    if kind == "object":
        properties = schema.get("properties") or {}
        return {name: instance(doc, properties.get(name, {}), depth + 1) for name in schema.get("required", [])}
    simple = {"array": [], "integer": 1, "number": 1.5, "boolean": False, "string": "x"}
    return simple.get(str(kind))


class Recorder(QuietHandler):
    """Records each request (method, path with query, headers, body) and answers what ``answers`` holds for its
    method and path (without the query)."""

    server: RecordingServer

    def _any(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.seen.append(
            {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
        )
        key = f"{self.command} {self.path.partition('?')[0]}"
        if key not in self.server.answers:
            self._reply(404, b'{"message": "not found"}', {"Content-Type": "application/json"})
            return
        answer = self.server.answers[key]
        if isinstance(answer, tuple):  # (content type, bytes): an answer that is not JSON
            self._reply(200, answer[1], {"Content-Type": answer[0]})
            return
        self._reply(200, json.dumps(answer).encode(), {"Content-Type": "application/json"})

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any


class RecordingServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    seen: list[dict[str, Any]]
    answers: dict[str, Any]


@pytest.fixture
def upstream() -> Iterator[RecordingServer]:
    httpd = RecordingServer(("127.0.0.1", 0), Recorder)
    httpd.seen, httpd.answers = [], {}
    with in_thread(httpd):
        yield httpd


def _imported(
    tmp_path: Path, spec: Path, upstream: RecordingServer, base: str, scopes: list[str]
) -> tuple[glovebox.ImportResult, glovebox.Runtime]:
    home = tmp_path / "home"
    server = f"http://127.0.0.1:{upstream.server_address[1]}{base}"
    with glovebox.Runtime(home=home) as rt:
        result = glovebox.import_openapi(rt, spec, server=server)
    document = {**result.policy, "principals": {"agent": {"scopes": scopes}}}
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(document).replace("require_approval", "allow"))
    return result, glovebox.Runtime(home=home, policy=policy)


def _call(rt: glovebox.Runtime, name: str, value: dict[str, Any], *, checked: bool = True) -> Any:
    """The tool's output; with ``checked=False`` also an answer its output schema refuses (``invalid_output``:
    Slack's own example for chat.postMessage does not match its schema), as None."""
    result = rt.call(name, value, principal="agent")
    if not checked and result.error is not None and result.error.code == "invalid_output":
        return None
    assert result.ok, result.error
    return result.output


# -- Stripe ---------------------------------------------------------------------------------------------


def test_stripe_deep_objects_in_queries_and_form_bodies(
    tmp_path: Path, upstream: RecordingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = _load("stripe.trimmed.json")
    tax_rate = instance(doc, {"$ref": "#/components/schemas/tax_rate"})
    listing = {"object": "list", "data": [tax_rate], "has_more": False, "url": "/v1/tax_rates"}
    upstream.answers = {"GET /v1/tax_rates": listing, "POST /v1/tax_rates": tax_rate}
    monkeypatch.setenv("STRIPE_BEARERAUTH", "sk_test_123")
    result, rt = _imported(tmp_path, DATA / "stripe.trimmed.json", upstream, "", ["stripe:read", "stripe:write"])
    assert result.api == "stripe" and result.skipped == []
    assert sorted(result.added) == [
        "stripe-get-balance",
        "stripe-get-tax-rates",
        "stripe-get-tax-rates-tax-rate",
        "stripe-post-files",
        "stripe-post-tax-rates",
        "stripe-post-tax-rates-tax-rate",
    ]
    with rt:
        listed = _call(
            rt,
            "stripe-get-tax-rates",
            {"created": {"gte": 1700000000, "lt": 1800000000}, "expand": ["data.x"], "limit": 3},
        )
        assert listed == listing
        seen = upstream.seen[-1]
        assert seen["path"] == (
            "/v1/tax_rates?created%5Bgte%5D=1700000000&created%5Blt%5D=1800000000&expand%5B0%5D=data.x&limit=3"
        )
        assert seen["headers"]["Authorization"] == "Bearer sk_test_123"  # the host's secret, never the tool's
        body = {"display_name": "VAT", "inclusive": False, "percentage": 20.5, "metadata": {"order": "6735"}}
        assert _call(rt, "stripe-post-tax-rates", {"body": body}) == tax_rate
        seen = upstream.seen[-1]
        assert seen["headers"]["Content-Type"] == "application/x-www-form-urlencoded"
        assert seen["body"] == b"display_name=VAT&inclusive=false&metadata%5Border%5D=6735&percentage=20.5"


# -- Slack ----------------------------------------------------------------------------------------------


def _example(doc: dict[str, Any], path: str, method: str) -> Any:
    content = doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]
    return content["examples"]["response"]["value"]


def test_slack_form_bodies_header_tokens_and_its_own_examples(tmp_path: Path, upstream: RecordingServer) -> None:
    doc = _load("slack.trimmed.json")
    upstream.answers = {
        "POST /api/chat.postMessage": _example(doc, "/chat.postMessage", "post"),
        "GET /api/conversations.list": _example(doc, "/conversations.list", "get"),
    }
    result, rt = _imported(tmp_path, DATA / "slack.trimmed.json", upstream, "/api", ["slack:read", "slack:write"])
    assert result.api == "slack" and result.skipped == []
    assert sorted(result.added) == [
        "slack-chat_post-message",
        "slack-conversations_list",
        "slack-files_upload",
        "slack-users_info",
    ]
    with rt:
        message = {"token": "xoxb-1", "body": {"channel": "C1", "text": "héllo & bye"}}
        posted = _call(rt, "slack-chat_post-message", message, checked=False)
        assert posted in (None, _example(doc, "/chat.postMessage", "post"))
        seen = upstream.seen[-1]
        assert seen["path"] == "/api/chat.postMessage" and seen["headers"]["token"] == "xoxb-1"
        assert seen["body"] == b"channel=C1&text=h%C3%A9llo%20%26%20bye"
        listed = _call(rt, "slack-conversations_list", {"types": "public_channel,private_channel", "limit": 2})
        assert listed == _example(doc, "/conversations.list", "get")
        assert upstream.seen[-1]["path"] == "/api/conversations.list?types=public_channel%2Cprivate_channel&limit=2"


# -- Kubernetes -----------------------------------------------------------------------------------------


def test_kubernetes_names_in_two_places_and_patch_media_types(tmp_path: Path, upstream: RecordingServer) -> None:
    doc = _load("kubernetes.trimmed.json")
    pods = instance(doc, {"$ref": "#/components/schemas/io.k8s.api.core.v1.PodList"})
    pod = instance(doc, {"$ref": "#/components/schemas/io.k8s.api.core.v1.Pod"})
    upstream.answers = {
        "GET /api/v1/namespaces/default/pods": pods,
        "GET /api/v1/namespaces/default/pods/web-1/proxy/healthz": ("text/plain; charset=utf-8", "ok ✓\n".encode()),
        "GET /api/v1/namespaces/default/pods/web-1/proxy/logo": ("image/png", PNG),
        "GET /api/v1/namespaces/default/pods/web-1/proxy/latin1": ("text/plain; charset=latin-1", b"caf\xe9"),
        "PATCH /api/v1/namespaces/default/pods/web-1": pod,
    }
    result, rt = _imported(
        tmp_path, DATA / "kubernetes.trimmed.json", upstream, "", ["kubernetes:read", "kubernetes:write"]
    )
    assert result.api == "kubernetes" and result.skipped == []
    assert len(result.added) == 5
    proxy = next(name for name in result.added if "proxy" in name)
    schema = rt.tool(proxy).manifest.input_schema
    assert isinstance(schema, dict) and {"path", "query_path"} <= set(schema["properties"])
    with rt:
        listed = _call(
            rt, "kubernetes-list-core-v1-namespaced-pod", {"namespace": "default", "labelSelector": "app=web"}
        )
        assert listed == pods
        assert upstream.seen[-1]["path"] == "/api/v1/namespaces/default/pods?labelSelector=app%3Dweb"
        answer = _call(rt, proxy, {"namespace": "default", "name": "web-1", "path": "healthz", "query_path": "/x"})
        assert answer == "ok ✓\n"  # a text answer is a string
        assert upstream.seen[-1]["path"] == "/api/v1/namespaces/default/pods/web-1/proxy/healthz?path=%2Fx"
        logo = _call(rt, proxy, {"namespace": "default", "name": "web-1", "path": "logo"})
        assert logo == {"content_type": "image/png", "base64": base64.b64encode(PNG).decode()}  # bytes: base64
        latin1 = _call(rt, proxy, {"namespace": "default", "name": "web-1", "path": "latin1"})
        assert latin1 == {"content_type": "text/plain; charset=latin-1", "base64": "Y2Fm6Q=="}  # not UTF-8: bytes
        patch = {"metadata": {"labels": {"app": "api"}}}
        patched = _call(
            rt, "kubernetes-patch-core-v1-namespaced-pod", {"namespace": "default", "name": "web-1", "body": patch}
        )
        assert patched == pod
        seen = upstream.seen[-1]
        assert seen["headers"]["Content-Type"] == "application/merge-patch+json"  # an object, as the schema says
        assert json.loads(seen["body"]) == patch


# -- Swagger 2.0 ----------------------------------------------------------------------------------------


def test_swagger_2_petstore_is_converted_and_called(tmp_path: Path, upstream: RecordingServer) -> None:
    doc = _load("petstore-swagger2.json")
    pet = instance(doc, {"$ref": "#/definitions/Pet"})
    upstream.answers = {
        "GET /v2/pet/findByStatus": [pet],
        "GET /v2/pet/7": pet,
        "POST /v2/pet/7": None,
        "POST /v2/pet/7/uploadImage": instance(doc, {"$ref": "#/definitions/ApiResponse"}),
    }
    result, rt = _imported(
        tmp_path, DATA / "petstore-swagger2.json", upstream, "/v2", ["petstore:read", "petstore:write"]
    )
    assert result.skipped == [] and len(result.added) == 20
    assert "converted from Swagger 2.0 to OpenAPI 3.0 (places name the converted document)" in result.notes
    upload = rt.tool("petstore-upload-file").manifest
    assert upload.operation is not None and upload.operation.body_encoding == "multipart"
    with rt:
        assert _call(rt, "petstore-find-pets-by-status", {"status": ["available", "sold"]}) == [pet]
        assert upstream.seen[-1]["path"] == "/v2/pet/findByStatus?status=available&status=sold"  # multi
        assert _call(rt, "petstore-get-pet-by-id", {"petId": 7}) == pet
        _call(rt, "petstore-update-pet-with-form", {"petId": 7, "body": {"name": "Rex", "status": "sold"}})
        seen = upstream.seen[-1]
        assert seen["headers"]["Content-Type"] == "application/x-www-form-urlencoded"
        assert seen["body"] == b"name=Rex&status=sold"
        image = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
        file = {"base64": base64.b64encode(image).decode(), "filename": "rex.png", "content_type": "image/png"}
        _call(rt, "petstore-upload-file", {"petId": 7, "body": {"additionalMetadata": "front", "file": file}})
        seen = upstream.seen[-1]
        boundary = seen["headers"]["Content-Type"].partition("boundary=")[2].encode()
        assert seen["body"] == (
            b"--" + boundary + b'\r\nContent-Disposition: form-data; name="additionalMetadata"\r\n\r\nfront\r\n'
            b"--" + boundary + b'\r\nContent-Disposition: form-data; name="file"; filename="rex.png"\r\n'
            b"Content-Type: image/png\r\n\r\n" + image + b"\r\n--" + boundary + b"--\r\n"
        )


SWAGGER: dict[str, Any] = {
    "swagger": "2.0",
    "info": {"title": "Legacy Inventory", "version": "1"},
    "host": "inventory.example.com",
    "basePath": "/api",
    "schemes": ["http", "https"],
    "securityDefinitions": {
        "key": {"type": "apiKey", "in": "header", "name": "X-Key"},
        "oauth": {"type": "oauth2", "flow": "accessCode", "authorizationUrl": "https://a", "tokenUrl": "https://t"},
    },
    "security": [{"key": []}],
    "parameters": {"limit": {"name": "limit", "in": "query", "type": "integer"}},
    "responses": {"items": {"description": "ok", "schema": {"type": "array", "items": {"$ref": "#/definitions/Item"}}}},
    "definitions": {
        "Item": {
            "type": "object",
            "required": ["id"],
            "properties": {"id": {"type": "integer"}, "note": {"type": "string", "x-nullable": True}},
        }
    },
    "paths": {
        "/items": {
            "get": {
                "operationId": "listItems",
                "parameters": [
                    {"$ref": "#/parameters/limit"},
                    {"name": "ids", "in": "query", "type": "array", "items": {"type": "integer"}},
                    {
                        "name": "tags",
                        "in": "query",
                        "type": "array",
                        "items": {"type": "string"},
                        "collectionFormat": "ssv",
                    },
                    {
                        "name": "sizes",
                        "in": "query",
                        "type": "array",
                        "items": {"type": "string"},
                        "collectionFormat": "pipes",
                    },
                    {"name": "X-Trace", "in": "header", "type": "array", "items": {"type": "string"}},
                ],
                "responses": {"200": {"$ref": "#/responses/items"}},
            },
            "post": {
                "operationId": "addItem",
                "parameters": [
                    {"name": "item", "in": "body", "required": True, "schema": {"$ref": "#/definitions/Item"}}
                ],
                "responses": {"201": {"description": "made", "schema": {"$ref": "#/definitions/Item"}}},
            },
        },
        "/items/{id}/notes": {
            "parameters": [{"name": "id", "in": "path", "required": True, "type": "integer"}],
            "post": {
                "operationId": "addNotes",
                "consumes": ["application/x-www-form-urlencoded"],
                "parameters": [
                    {"name": "text", "in": "formData", "type": "string", "required": True},
                    {"name": "labels", "in": "formData", "type": "array", "items": {"type": "string"}},
                ],
                "responses": {"204": {"description": "done"}},
            },
        },
        "/export": {
            "get": {
                "operationId": "export",
                "parameters": [
                    {
                        "name": "cols",
                        "in": "query",
                        "type": "array",
                        "items": {"type": "string"},
                        "collectionFormat": "tsv",
                    }
                ],
                "responses": {"200": {"description": "ok", "schema": {"type": "file"}}},
            }
        },
    },
}


def test_swagger_2_conversion_covers_every_collection_format(tmp_path: Path, upstream: RecordingServer) -> None:
    """host/basePath/schemes (https first), a $ref'd parameter and response, in: body, in: formData (csv
    arrays joined), collectionFormat csv/ssv/pipes/multi, security definitions; tsv (no OpenAPI 3 style) is
    the one operation skipped, with its reason."""
    with glovebox.Runtime(home=tmp_path / "dry") as rt:
        dry = glovebox.import_openapi(rt, SWAGGER, dry_run=True)
    assert dry.api == "legacy" and sorted(dry.added) == ["legacy-add-item", "legacy-add-notes", "legacy-list-items"]
    assert [skip["operation"] for skip in dry.skipped] == ["export"]
    assert "a parameter serialized by a media type" in dry.skipped[0]["reason"]
    assert [secret.header for secret in dry.secrets] == ["X-Key"]
    spec = tmp_path / "legacy.yaml"
    spec.write_text(yaml.safe_dump(SWAGGER))
    result, rt = _imported(tmp_path, spec, upstream, "/api", ["legacy:read", "legacy:write"])
    assert sorted(result.added) == sorted(dry.added)
    listing = rt.tool("legacy-list-items").manifest
    assert listing.capabilities.http[0].paths == ["/api/items"]
    assert listing.output_schema["items"] == {"$ref": "#/$defs/Item"}  # type: ignore[index]
    assert listing.output_schema["$defs"]["Item"]["properties"]["note"]["type"] == ["string", "null"]  # type: ignore[index]
    upstream.answers = {"GET /api/items": [{"id": 1, "note": None}], "POST /api/items/4/notes": None}
    with rt:
        value = {"limit": 5, "ids": [1, 2], "tags": ["a", "b"], "sizes": ["s", "m"], "X-Trace": ["t1", "t2"]}
        assert _call(rt, "legacy-list-items", value) == [{"id": 1, "note": None}]
        seen = upstream.seen[-1]
        assert seen["path"] == "/api/items?limit=5&ids=1,2&tags=a%20b&sizes=s%7Cm"
        assert parse_qs(seen["path"].partition("?")[2])["tags"] == ["a b"]
        assert seen["headers"]["X-Trace"] == "t1,t2"
        _call(rt, "legacy-add-notes", {"id": 4, "body": {"text": "x y", "labels": ["p", "q"]}})
        assert upstream.seen[-1]["body"] == b"labels=p,q&text=x%20y"


def test_an_output_schema_past_its_size_keeps_the_definitions_nearest_the_root(tmp_path: Path) -> None:
    """Stripe's responses reach most of its schemas (670 KB each): past 128 KiB the definitions nearest the
    root stay and deeper references accept anything; an input schema is never cut."""
    big = "x" * 60_000
    schemas = {
        "A": {"type": "object", "description": big, "properties": {"b": {"$ref": "#/components/schemas/B"}}},
        "B": {"type": "object", "description": big, "properties": {"c": {"$ref": "#/components/schemas/C"}}},
        "C": {"type": "object", "description": big, "properties": {"n": {"type": "integer"}}},
    }
    ref = {"$ref": "#/components/schemas/A"}
    spec = {
        "openapi": "3.0.3",
        "info": {"title": "Big", "version": "1"},
        "servers": [{"url": "https://big.example.com"}],
        "components": {"schemas": schemas},
        "paths": {
            "/a": {
                "post": {
                    "operationId": "make",
                    "requestBody": {"content": {"application/json": {"schema": ref}}},
                    "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": ref}}}},
                }
            }
        },
    }
    with glovebox.Runtime(home=tmp_path / "home") as rt:
        tool = glovebox.import_openapi(rt, spec).tools[0].manifest
    assert isinstance(tool.output_schema, dict) and sorted(tool.output_schema["$defs"]) == ["A", "B"]
    assert tool.output_schema["$defs"]["B"]["properties"]["c"] == {
        "description": "C (not expanded: the schema's size limit)"
    }
    assert isinstance(tool.input_schema, dict)
    assert sorted(tool.input_schema["properties"]["body"] and tool.input_schema["$defs"]) == ["A", "B", "C"]


def test_a_rename_map_names_tools_from_the_command_line_or_a_file(tmp_path: Path) -> None:
    """--rename OLD=NEW (an operationId, METHOD /path or the tool name) and --rename FILE: the chosen name gets
    the API's prefix, so the fragment's grant covers it; a key that matches nothing is a note."""
    from click.testing import CliRunner

    from glovebox.cli._main import cli

    renames = tmp_path / "renames.yaml"
    renames.write_text("slack-users_info: whois\nnothing.here: x\n")
    spec = str(DATA / "slack.trimmed.json")
    args = ["--home", str(tmp_path / "home"), "import", "openapi", spec, "--dry-run", "--json"]
    args += ["--rename", "chat_postMessage=post", "--rename", "GET /conversations.list=slack-channels"]
    out = CliRunner().invoke(cli, [*args, "--rename", str(renames)])
    assert out.exit_code == 0, out.output
    result = json.loads(out.output)
    assert sorted(result["added"]) == ["slack-channels", "slack-files_upload", "slack-post", "slack-whois"]
    assert "--rename 'nothing.here' matches no imported operation" in result["notes"]
    assert all(
        rule["tool"] != "slack-post" or rule["action"] == "require_approval" for rule in result["policy"]["rules"]
    )
    with glovebox.Runtime(home=tmp_path / "api") as rt:
        taken = pytest.raises(glovebox.InvalidSpec, match="'slack-post' would name two tools")
        with taken:
            glovebox.import_openapi(rt, spec, rename={"chat_postMessage": "post", "files_upload": "post"}, dry_run=True)
        with pytest.raises(glovebox.InvalidSpec, match="is not a tool name"):
            glovebox.import_openapi(rt, spec, rename={"chat_postMessage": "Post Message"}, dry_run=True)
    bad = CliRunner().invoke(cli, [*args, "--rename", "no-such-file"])
    assert bad.exit_code == 2 and "expected OLD=NEW or a file" in bad.output


# -- GitHub's whole description (fetched with npm once into pytest's cache) ---------------------------------

OCTOKIT = "@octokit/openapi@23.0.2"


@pytest.fixture(scope="session")
def github_full(pytestconfig: pytest.Config) -> Path:
    """GitHub's whole REST description (13 MB) from npm ``@octokit/openapi``, packed once into the cache."""
    import shutil
    import subprocess
    import tarfile

    from filelock import FileLock

    from ..guestcache import default_cache_root

    cache = default_cache_root(pytestconfig) / "specs"
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / "api.github.com.json"
    with FileLock(str(cache / ".lock")):
        if not target.is_file():
            if shutil.which("npm") is None:
                pytest.skip("npm is not installed: GitHub's whole description cannot be fetched")
            packed = subprocess.run(
                ["npm", "pack", OCTOKIT, "--silent", "--pack-destination", str(cache)],
                capture_output=True,
                text=True,
                timeout=300,
            )
            if packed.returncode != 0:
                pytest.skip(f"npm pack {OCTOKIT} failed (offline?): {packed.stderr[-300:]}")
            tarball = cache / packed.stdout.strip().splitlines()[-1]
            with tarfile.open(tarball) as archive:
                member = archive.extractfile("package/generated/api.github.com.json")
                assert member is not None
                target.with_suffix(".part").write_bytes(member.read())
            target.with_suffix(".part").replace(target)
            tarball.unlink()
    return target


@pytest.mark.slow
def test_github_whole_description_imports_every_operation_and_calls_one(
    github_full: Path, tmp_path: Path, upstream: RecordingServer
) -> None:
    """All 1,223 operations of GitHub's REST description become tools (none skipped), its API name is
    short, and an imported call answers the description's own example from a local server."""
    doc = json.loads(github_full.read_text())
    example = doc["components"]["examples"]["full-repository-default-response"]["value"]
    upstream.answers = {"GET /repos/vercel/next.js": example}
    result, rt = _imported(tmp_path, github_full, upstream, "", ["github:read", "github:write"])
    operations = sum(
        1 for item in doc["paths"].values() for method in item if method in ("get", "post", "put", "patch", "delete")
    )
    assert result.api == "github" and result.skipped == [] and len(result.added) == operations > 1200
    assert len(set(result.added)) == len(result.added) and all(len(name) <= 64 for name in result.added)
    with rt:
        answer = rt.call("github-repos-get", {"owner": "vercel", "repo": "next.js"}, principal="agent")
        assert upstream.seen[-1]["path"] == "/repos/vercel/next.js"
        assert answer.ok or (answer.error is not None and answer.error.code == "invalid_output")
