"""``glovebox import openapi`` end to end: a petstore spec, a real server on 127.0.0.1, the CLI and the library.

The server checks the bearer token the host injects; every test runs the
imported operations through the generic guest under the policy fragment the
import printed (merged with principals), and asserts exact error codes.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import glovebox
from glovebox.cli._main import cli
from glovebox.registry._registry import Registry

from ..capabilities.test_http import QuietHandler, in_thread
from ..conftest import fail_on_call

SPEC = Path(__file__).parents[1] / "fixtures" / "petstore.yaml"
TOKEN = "pet-T0KEN-must-stay-hidden"
PRINCIPALS = {
    "agent": {"scopes": ["petstore:read", "petstore:write"]},
    "boss": {"scopes": ["glovebox:approve"]},
}


class PetHandler(QuietHandler):
    server: PetServer

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.seen.append({"method": self.command, "path": self.path, "headers": dict(self.headers)})
        path, _, query = self.path.partition("?")
        if path in ("/spec.yaml", "/huge.yaml"):  # the spec itself is public
            self._reply(200, SPEC.read_bytes() if path == "/spec.yaml" else b"#" * (8 * 1024 * 1024 + 1))
            return
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._reply(401, b'{"error": "no token"}')
            return
        if path == "/v1/pets/echo":  # a hostile upstream: echoes the injected header back
            self._json(200, {"id": "echo", "name": self.headers["Authorization"]})
            return
        if self.command == "GET" and path == "/v1/pets":
            pets = [{"id": "1", "name": "Rex", "tag": query}]
            self._json(200, pets)
        elif self.command == "POST" and path == "/v1/pets":
            self._json(201, {"id": "2", **json.loads(body)})
        elif path.startswith("/v1/pets/") and self.command == "GET":
            pet_id = path.removeprefix("/v1/pets/")
            self._json(200, {"id": pet_id, "name": "Rex"}) if pet_id == "1" else self._json(404, {"error": "no pet"})
        elif path.startswith("/v1/pets/") and self.command == "DELETE":
            self.server.deleted.append(path.removeprefix("/v1/pets/"))
            self._reply(204, b"")
        else:
            self._json(404, {"error": "no route"})

    def _json(self, status: int, value: Any) -> None:
        self._reply(status, json.dumps(value).encode(), {"Content-Type": "application/json"})

    do_GET = do_POST = do_DELETE = _handle


class PetServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    seen: list[dict[str, Any]]
    deleted: list[str]


@pytest.fixture
def pets() -> Iterator[PetServer]:
    httpd = PetServer(("127.0.0.1", 0), PetHandler)
    httpd.seen, httpd.deleted = [], []
    with in_thread(httpd):
        yield httpd


def base(server: PetServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def cli_import(home: Path, *args: str) -> Any:
    result = CliRunner().invoke(cli, ["--home", str(home), "import", "openapi", *args])
    return result


def policy_from(fragment: dict[str, Any], tmp_path: Path) -> Path:
    """The printed fragment merged into a policy that names who holds which scopes."""
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump({**fragment, "principals": PRINCIPALS}), encoding="utf-8")
    return path


@pytest.fixture
def imported(pets: PetServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[glovebox.Runtime]:
    """The petstore imported through the CLI, its fragment written with --policy-out and merged."""
    monkeypatch.setenv("PETSTORE_BEARERAUTH", TOKEN)
    home, fragment = tmp_path / "home", tmp_path / "fragment.yaml"
    out = cli_import(home, str(SPEC), "--server", base(pets), "--policy-out", str(fragment))
    assert out.exit_code == 0, out.output
    assert "secret: set PETSTORE_BEARERAUTH (Authorization: Bearer <PETSTORE_BEARERAUTH>)" in out.output
    with glovebox.Runtime(home=home, policy=policy_from(yaml.safe_load(fragment.read_text()), tmp_path)) as rt:
        yield rt


def test_every_operation_becomes_a_tool_sharing_one_artifact(imported: glovebox.Runtime) -> None:
    tools = {info.name: info for info in imported.tools()}
    assert sorted(tools) == [
        "petstore-create-pet",
        "petstore-delete-pet",
        "petstore-get-pet-by-id",
        "petstore-list-pets",
    ]
    assert len({info.digest for info in tools.values()}) == 1
    read = tools["petstore-get-pet-by-id"].manifest
    assert read.kind == "openapi" and read.required_scopes == ["petstore:read"]
    assert [(r.methods, r.paths) for r in read.capabilities.http] == [(["GET"], ["/v1/pets/*"])]
    assert tools["petstore-delete-pet"].manifest.required_scopes == ["petstore:write"]
    assert tools["petstore-list-pets"].manifest.input_schema["properties"]["limit"]["maximum"] == 100
    assert tools["petstore-create-pet"].manifest.input_schema["$defs"]["Pet"]["properties"]["parent"] == {
        "anyOf": [{"$ref": "#/$defs/Pet"}, {"type": "null"}]
    }


def test_a_read_works_end_to_end(imported: glovebox.Runtime, pets: PetServer) -> None:
    result = imported.call("petstore-get-pet-by-id", {"petId": "1"}, principal="agent")
    assert result.ok, result.error
    assert result.output == {"id": "1", "name": "Rex"}
    assert pets.seen[-1]["path"] == "/v1/pets/1"


def test_query_and_header_parameters_reach_the_server(imported: glovebox.Runtime, pets: PetServer) -> None:
    value = {"limit": 5, "tag": ["a b", "c&d"], "X-Request-Id": "req-1"}
    result = imported.call("petstore-list-pets", value, principal="agent")
    assert result.ok, result.error
    assert result.output[0]["tag"] == "limit=5&tag=a%20b&tag=c%26d"
    assert pets.seen[-1]["headers"]["X-Request-Id"] == "req-1"


def test_a_non_2xx_answer_is_a_guest_error_naming_the_status(imported: glovebox.Runtime) -> None:
    result = imported.call("petstore-get-pet-by-id", {"petId": "7"}, principal="agent")
    assert result.error is not None and result.error.code == "guest_error"
    assert "answered HTTP 404" in result.error.message


def test_input_is_validated_against_the_spec(imported: glovebox.Runtime, pets: PetServer) -> None:
    result = imported.call("petstore-list-pets", {"limit": 500}, principal="agent")
    assert result.error is not None and result.error.code == "invalid_input"
    assert pets.seen == []


def test_a_delete_waits_for_approval_and_runs_exactly_once(imported: glovebox.Runtime, pets: PetServer) -> None:
    first = imported.call("petstore-delete-pet", {"petId": "1"}, principal="agent")
    assert first.error is not None and first.error.code == "approval_required"
    assert pets.deleted == []
    imported.approve(first.error.details["approval_id"], principal="boss")
    second = imported.call("petstore-delete-pet", {"petId": "1"}, principal="agent")
    assert second.ok and second.output is None
    third = imported.call("petstore-delete-pet", {"petId": "1"}, principal="agent")
    assert third.error is not None and third.error.code == "approval_required"
    assert pets.deleted == ["1"]


def test_a_write_with_a_body_after_approval(imported: glovebox.Runtime) -> None:
    value = {"body": {"name": "Tom", "tag": "cat"}}
    first = imported.call("petstore-create-pet", value, principal="agent")
    assert first.error is not None and first.error.code == "approval_required"
    imported.approve(first.error.details["approval_id"], principal="boss")
    assert imported.call("petstore-create-pet", value, principal="agent").output == {"id": "2", **value["body"]}


def test_a_principal_without_the_scope_is_refused(imported: glovebox.Runtime, pets: PetServer) -> None:
    result = imported.call("petstore-get-pet-by-id", {"petId": "1"}, principal="stranger")
    assert result.error is not None and result.error.code == "permission_denied"
    assert pets.seen == []


@pytest.mark.parametrize(
    "pet_id", ["../admin", "..", ".", "1/../../admin", "%2e%2e", ".%2e", "%2F", "a/b", "..%2fadmin", "%252e%252e"]
)
def test_a_traversal_path_parameter_stays_in_its_segment_or_is_denied(
    imported: glovebox.Runtime, pets: PetServer, pet_id: str
) -> None:
    result = imported.call("petstore-get-pet-by-id", {"petId": pet_id}, principal="agent")
    assert result.error is not None and result.error.code == "capability_denied"
    assert pets.seen == []


@pytest.mark.parametrize("pet_id", ["next.js", "README.md", "a-b_c~d.e", "v1.2.3"])
def test_unreserved_characters_in_a_path_parameter_are_sent_as_they_are(
    imported: glovebox.Runtime, pets: PetServer, pet_id: str
) -> None:
    imported.call("petstore-get-pet-by-id", {"petId": pet_id}, principal="agent")
    assert pets.seen[-1]["path"] == f"/v1/pets/{pet_id}"


def test_reserved_characters_in_a_path_parameter_are_percent_encoded(
    imported: glovebox.Runtime, pets: PetServer
) -> None:
    imported.call("petstore-get-pet-by-id", {"petId": "a b?c#d&e"}, principal="agent")
    assert pets.seen[-1]["path"] == "/v1/pets/a%20b%3Fc%23d%26e"


def test_the_bearer_secret_is_injected_and_never_seen(imported: glovebox.Runtime, pets: PetServer) -> None:
    result = imported.call("petstore-get-pet-by-id", {"petId": "1"}, principal="agent")
    assert result.ok and pets.seen[-1]["headers"]["Authorization"] == f"Bearer {TOKEN}"
    failed = imported.call("petstore-get-pet-by-id", {"petId": "7"}, principal="agent")
    assert TOKEN not in json.dumps(result.to_dict()) + json.dumps(failed.to_dict())
    rows = sqlite3.connect(imported.home / "audit.sqlite").execute("SELECT * FROM sqlite_master").fetchall()
    assert rows
    dump = json.dumps(list(imported.audit.records()))
    assert failed.meta["call_id"] in dump and TOKEN not in dump


def test_a_hostile_server_outside_the_granted_one_is_denied(
    imported: glovebox.Runtime, pets: PetServer, tmp_path: Path
) -> None:
    """The operator's policy grants the spec's server; an import pointed elsewhere reaches nothing."""
    other = f"http://127.0.0.1:{pets.server_address[1] + 1}/v1"
    hostile = glovebox.import_openapi(imported, SPEC, name="evil", server=other)
    assert [info.name for info in hostile.tools][0] == "evil-list-pets"
    policy = yaml.safe_load((tmp_path / "policy.yaml").read_text())
    policy["rules"].append({"tool": "evil-*", "action": "allow"})
    policy["principals"]["agent"]["scopes"].append("evil:read")
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(policy))
    imported.reload_policy()
    result = imported.call("evil-get-pet-by-id", {"petId": "1"}, principal="agent")
    assert result.error is not None and result.error.code == "capability_denied"
    assert pets.seen == []


def test_reimport_reports_the_diff_and_refuses_widening(
    imported: glovebox.Runtime, pets: PetServer, tmp_path: Path
) -> None:
    spec = yaml.safe_load(SPEC.read_text())
    same = glovebox.import_openapi(imported, spec, server=base(pets))
    assert (same.added, same.changed, same.removed) == ([], [], [])
    del spec["paths"]["/pets"]["post"]
    spec["paths"]["/pets/{petId}"]["get"]["summary"] = "Read one pet, again"
    spec["paths"]["/pets/{petId}/toys"] = {
        "get": {
            "operationId": "listToys",
            "parameters": [{"name": "petId", "in": "path", "required": True}],
            "responses": {"200": {"description": "toys"}},
        }
    }
    spec["paths"]["/pets/{petId}/toys"]["get"]["parameters"][0]["schema"] = {"type": "string"}
    diff = glovebox.import_openapi(imported, spec, server=base(pets))
    assert diff.added == ["petstore-list-toys"]
    assert diff.changed == ["petstore-get-pet-by-id"]
    assert diff.removed == ["petstore-create-pet"]
    assert imported.tool("petstore-get-pet-by-id").version == "1.0.1"
    assert imported.tool("petstore-create-pet").deprecated == "removed from petstore by a re-import"
    spec["paths"]["/pets/{petId}"]["delete"]["operationId"] = "getPetById2"
    spec["paths"]["/pets/{petId}"]["get"]["operationId"] = "deletePet"  # delete-pet now a GET: wider
    with pytest.raises(glovebox.WideningRefused) as refused:
        glovebox.import_openapi(imported, spec, server=base(pets))
    assert "petstore-delete-pet: GET http://127.0.0.1" in refused.value.message
    assert imported.tool("petstore-delete-pet").version == "1.0.0", "nothing registered"
    assert "petstore-get-pet-by-id2" not in {info.name for info in imported.tools()}
    accepted = glovebox.import_openapi(imported, spec, server=base(pets), accept_widening=True)
    assert "petstore-delete-pet" in accepted.changed and imported.tool("petstore-delete-pet").version == "1.0.1"


def test_reimport_through_the_cli_prints_the_diff(imported: glovebox.Runtime, pets: PetServer, tmp_path: Path) -> None:
    spec = yaml.safe_load(SPEC.read_text())
    spec["paths"]["/pets/{petId}"]["delete"]["summary"] = "Delete a pet for good"
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump(spec))
    out = cli_import(imported.home, str(changed), "--server", base(pets))
    assert out.exit_code == 0, out.output
    assert "0 added, 1 changed, 0 removed, 3 unchanged" in out.output
    assert "  ~ petstore-delete-pet" in out.output
    other = f"http://127.0.0.1:{pets.server_address[1] + 1}/v1"
    refused = cli_import(imported.home, str(changed), "--server", other)
    assert refused.exit_code == 1
    assert refused.output.startswith("error [widening_refused]: re-importing 'petstore' would widen")


# -- bad specs ----------------------------------------------------------------------


def _broken(change: Any) -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load(SPEC.read_text())
    change(spec)
    return spec


BAD_SPECS = [
    (lambda s: s.update(openapi="2.0"), "/openapi: 2.0; OpenAPI 3.0 and 3.1 are supported"),
    (lambda s: s.update(swagger="1.2"), "/swagger: '1.2'; Swagger 2.0 and OpenAPI 3.0/3.1 are supported"),
    (
        lambda s: s["paths"]["/pets"]["post"].update(
            requestBody={"content": {"application/json": {"schema": {"$ref": "other.yaml#/Pet"}}}}
        ),
        "/paths/~1pets/post/requestBody/content/application~1json/schema/$ref: 'other.yaml#/Pet' refers outside",
    ),
    (
        lambda s: s["paths"]["/pets/{petId}"]["get"]["responses"]["200"]["content"]["application/json"].update(
            schema={"$ref": "#/components/schemas/Nope"}
        ),
        "$ref '#/components/schemas/Nope' does not resolve",
    ),
    (lambda s: s.pop("servers"), "/servers: the document names no server"),
    (lambda s: s["paths"]["/pets"]["post"].update(operationId="listPets"), "Operation ID 'listPets'"),
]

#: Operations that cannot be tools: skipped (the rest imported), or the whole document refused with strict.
BAD_OPERATIONS = [
    (
        lambda s: s["paths"]["/pets"]["get"]["parameters"].append(
            {"name": "c", "in": "query", "content": {"text/csv": {"schema": {"type": "string"}}}}
        ),
        "/paths/~1pets/get/parameters/3/content: parameter 'c': a parameter serialized by a media type (text/csv)",
    ),
    (
        lambda s: s["paths"]["/pets"]["get"]["parameters"][1].update(**{"in": "nowhere"}),
        "/paths/~1pets/get/parameters/1/in: invalid OpenAPI 3.1.0",
    ),
]


@pytest.mark.parametrize(("change", "message"), BAD_OPERATIONS)
def test_an_operation_that_cannot_be_a_tool_is_skipped_or_refused_with_strict(
    change: Any, message: str, tmp_path: Path, runtime: glovebox.Runtime
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_broken(change)))
    with pytest.raises(glovebox.InvalidSpec) as refused:
        glovebox.import_openapi(runtime, path, server="https://pets.example.com/v1", strict=True)
    assert message in refused.value.message and runtime.tools() == []
    out = cli_import(runtime.home, str(path), "--server", "https://pets.example.com/v1", "--dry-run")
    assert out.exit_code == 0, out.output
    assert "would import petstore (openapi): 3 added" in out.output
    assert f"  ! listPets: {message}" in out.output
    result = glovebox.import_openapi(runtime, path, server="https://pets.example.com/v1")
    assert sorted(result.added) == ["petstore-create-pet", "petstore-delete-pet", "petstore-get-pet-by-id"]
    assert result.skipped == [
        {"operation": "listPets", "place": "/paths/~1pets/get", "reason": result.skipped[0]["reason"]}
    ]
    assert result.skipped[0]["reason"].startswith(message)


def test_names_that_collide_get_a_hash_suffix_and_a_note(runtime: glovebox.Runtime) -> None:
    spec = _broken(lambda s: s["paths"]["/pets"]["post"].update(operationId="list-pets"))
    result = glovebox.import_openapi(runtime, spec, server="https://pets.example.com/v1", dry_run=True)
    pets = sorted(name for name in result.added if name.startswith("petstore-list-pets"))
    assert len(pets) == 2 and all(len(name) == len("petstore-list-pets-") + 8 for name in pets)
    assert result.notes == [f"2 operations make the tool name 'petstore-list-pets': named {', '.join(pets)}"]
    again = glovebox.import_openapi(runtime, spec, server="https://pets.example.com/v1", dry_run=True)
    assert sorted(again.added) == sorted(result.added)  # the same names every time


@pytest.mark.parametrize(("change", "message"), BAD_SPECS)
def test_a_bad_spec_is_refused_naming_the_place(
    change: Any, message: str, tmp_path: Path, runtime: glovebox.Runtime
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_broken(change)))
    with pytest.raises(glovebox.InvalidSpec) as refused:
        glovebox.import_openapi(runtime, path)
    assert message in refused.value.message
    out = cli_import(runtime.home, str(path))
    assert out.exit_code == 1 and out.output.startswith("error [invalid_spec]: ")
    assert runtime.tools() == []


def test_a_yaml_syntax_error_names_the_line(tmp_path: Path, runtime: glovebox.Runtime) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("openapi: 3.1.0\ninfo: {title: x\npaths: {}\n")
    with pytest.raises(glovebox.InvalidSpec, match=r"bad.yaml: line 3, column \d+: not valid YAML/JSON"):
        glovebox.import_openapi(runtime, path)


def test_an_import_registers_all_or_none(
    pets: PetServer, runtime: glovebox.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure inside the registry transaction, after some rows went in, leaves no tool behind."""
    # four checks before the transaction, then the third inside it
    fail_on_call(monkeypatch, Registry, "check_conflict", 4 + 3, sqlite3.OperationalError("disk I/O error"))
    with pytest.raises(sqlite3.OperationalError):
        glovebox.import_openapi(runtime, SPEC, server=base(pets))
    monkeypatch.undo()
    assert runtime.tools() == []
    assert len(glovebox.import_openapi(runtime, SPEC, server=base(pets)).added) == 4


def test_a_name_taken_by_another_tool_refuses_the_whole_import(
    pets: PetServer, runtime: glovebox.Runtime, build_guest: Any
) -> None:
    runtime.register(build_guest("echo"), {"name": "petstore-delete-pet", "version": "1.0.0"})
    with pytest.raises(
        glovebox.InvalidSpec, match="'petstore-delete-pet' is already taken by petstore-delete-pet@1.0.0"
    ):
        glovebox.import_openapi(runtime, SPEC, server=base(pets))
    assert [info.name for info in runtime.tools()] == ["petstore-delete-pet"]


def test_the_operation_field_belongs_to_imported_kinds_only() -> None:
    with pytest.raises(glovebox.InvalidManifest, match="kind 'openapi' needs an 'operation'"):
        glovebox.Manifest.model_validate({"name": "x", "kind": "openapi"}) if False else _parse(
            {"name": "x", "kind": "openapi"}
        )
    op = {"api": "x", "method": "GET", "url": "https://a.example.com", "path": "/"}
    with pytest.raises(glovebox.InvalidManifest, match="'operation' is only for kind 'openapi' or 'graphql'"):
        _parse({"name": "x", "operation": op})


def _parse(data: dict[str, Any]) -> Any:
    from glovebox.model._manifest import parse_manifest

    return parse_manifest(data)


def test_a_spec_is_fetched_from_a_url_once_and_bounded(pets: PetServer, runtime: glovebox.Runtime) -> None:
    origin = f"http://127.0.0.1:{pets.server_address[1]}"
    result = glovebox.import_openapi(runtime, f"{origin}/spec.yaml", server=base(pets))
    assert len(result.added) == 4
    assert [seen["path"] for seen in pets.seen] == ["/spec.yaml"]
    with pytest.raises(glovebox.InvalidSpec, match="huge.yaml: over the 8388608-byte spec limit"):
        glovebox.import_openapi(runtime, f"{origin}/huge.yaml", server=base(pets), max_spec_bytes=8 * 1024 * 1024)


def test_yaml_aliases_are_refused(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    path = tmp_path / "laughs.yaml"
    path.write_text("openapi: 3.1.0\na: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n")
    with pytest.raises(glovebox.InvalidSpec, match=r"laughs.yaml: line 3, column 8: YAML aliases are not supported"):
        glovebox.import_openapi(runtime, path)


def test_an_upstream_echoing_the_secret_shows_it_redacted(imported: glovebox.Runtime, pets: PetServer) -> None:
    result = imported.call("petstore-get-pet-by-id", {"petId": "echo"}, principal="agent")
    assert result.ok, result.error
    assert result.output == {"id": "echo", "name": "[REDACTED]"}
    assert pets.seen[-1]["headers"]["Authorization"] == f"Bearer {TOKEN}"


def test_a_header_parameter_cannot_smuggle_a_header(imported: glovebox.Runtime, pets: PetServer) -> None:
    value = {"X-Request-Id": "a\r\nAuthorization: Bearer stolen"}
    result = imported.call("petstore-list-pets", value, principal="agent")
    assert result.error is not None and result.error.code == "capability_denied"
    assert pets.seen == []


def test_an_authorization_header_parameter_is_ignored(tmp_path: Path, runtime: glovebox.Runtime) -> None:
    """OpenAPI says such a parameter is ignored: a caller never sets the header the host injects."""
    spec = yaml.safe_load(SPEC.read_text())
    spec["paths"]["/pets"]["get"]["parameters"].append(
        {"name": "Authorization", "in": "header", "schema": {"type": "string"}}
    )
    result = glovebox.import_openapi(runtime, spec, dry_run=True)
    assert result.dry_run and runtime.tools() == []
    plan = glovebox.import_openapi(runtime, spec)
    listing = next(info for info in plan.tools if info.name == "petstore-list-pets")
    assert "Authorization" not in listing.manifest.input_schema["properties"]
    assert listing.manifest.operation is not None and listing.manifest.operation.headers == ["X-Request-Id"]


def test_openapi_30_json_is_translated(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    spec = yaml.safe_load(SPEC.read_text())
    spec["openapi"] = "3.0.3"
    spec["components"]["schemas"]["Pet"]["properties"]["tag"] = {"type": "string", "nullable": True, "example": "x"}
    spec["components"]["schemas"]["Pet"]["properties"]["parent"] = {"$ref": "#/components/schemas/Pet"}
    spec["paths"]["/pets"]["get"]["parameters"][0] = {
        "name": "limit",
        "in": "query",
        "schema": {"type": "integer", "maximum": 100, "exclusiveMaximum": True},
    }
    path = tmp_path / "petstore.json"
    path.write_text(json.dumps(spec))
    result = glovebox.import_openapi(runtime, path, server="https://pets.example.com/v1", dry_run=True)
    assert len(result.added) == 4 and runtime.tools() == []
    listing = glovebox.import_openapi(runtime, path, server="https://pets.example.com/v1").tools[0]
    assert listing.manifest.input_schema["properties"]["limit"] == {"type": "integer", "exclusiveMaximum": 100}
    pet = listing.manifest.output_schema["$defs"]["Pet"]  # type: ignore[index]
    assert pet["properties"]["tag"] == {"type": ["string", "null"]}
    assert pet["properties"]["parent"] == {"$ref": "#/$defs/Pet"}
    assert listing.manifest.capabilities.http[0].host == "pets.example.com"
    assert listing.manifest.capabilities.http[0].allow_private is False


def test_a_literal_star_in_a_path_is_refused(runtime: glovebox.Runtime) -> None:
    spec = yaml.safe_load(SPEC.read_text())
    spec["paths"]["/pets/*"] = spec["paths"].pop("/pets")
    with pytest.raises(glovebox.InvalidSpec, match=r"/paths/~1pets~1\*/get: path '/pets/\*': a literal '\*'"):
        glovebox.import_openapi(runtime, spec, server="https://pets.example.com", strict=True)
    skipped = glovebox.import_openapi(runtime, spec, server="https://pets.example.com", dry_run=True).skipped
    assert [skip["place"] for skip in skipped] == ["/paths/~1pets~1*/get", "/paths/~1pets~1*/post"]


# -- a spec cannot make the host fetch anything, whatever the key (issue 24, defect 2) ------------------


def _minimal() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "https://api.example.com/v1"}],
        "paths": {"/x": {"get": {"operationId": "getX", "responses": {"200": {"description": "ok"}}}}},
        "components": {"schemas": {}},
    }


def _schemas(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["components"]["schemas"]  # type: ignore[no-any-return]


#: (what is changed, the place the refusal names): every key a $ref object may sit under.
EXTERNAL_REFS: list[tuple[Any, str]] = [
    (lambda d, r: d["paths"]["/x"]["get"]["responses"].update(default=r), "/paths/~1x/get/responses/default/$ref"),
    *[
        (lambda d, r, key=key: _schemas(d).update({key: r}), f"/components/schemas/{key}/$ref")
        for key in ("default", "enum", "const", "example", "examples")
    ],
    (
        lambda d, r: _schemas(d).update(A={"type": "object", "properties": {"default": r}}),
        "/components/schemas/A/properties/default/$ref",
    ),
    (lambda d, r: _schemas(d).update(A={"type": "object", "default": r}), "/components/schemas/A/default/$ref"),
    (lambda d, r: _schemas(d).update(A={"enum": [r]}), "/components/schemas/A/enum/0/$ref"),
    (lambda d, r: _schemas(d).update(A={"examples": [r]}), "/components/schemas/A/examples/0/$ref"),
    (lambda d, r: d["components"].update(examples={"default": r}), "/components/examples/default/$ref"),
    (lambda d, r: d.update(webhooks={"default": r}), "/webhooks/default/$ref"),
    (
        lambda d, r: d["paths"]["/x"]["get"]["responses"]["200"].update(headers={"default": r}),
        "/paths/~1x/get/responses/200/headers/default/$ref",
    ),
    (lambda d, r: _schemas(d).update(A={"$dynamicRef": r["$ref"]}), "/components/schemas/A/$dynamicRef"),
]


@pytest.mark.parametrize(("change", "place"), EXTERNAL_REFS)
def test_an_external_ref_under_any_key_is_refused_and_never_fetched(
    change: Any, place: str, pets: PetServer, runtime: glovebox.Runtime
) -> None:
    doc = _minimal()
    change(doc, {"$ref": f"http://127.0.0.1:{pets.server_address[1]}/x.json"})
    with pytest.raises(glovebox.InvalidSpec) as refused:
        glovebox.import_openapi(runtime, doc, dry_run=True)
    assert pets.seen == []  # not one request: the refusal comes before the validator
    assert f"{place}: " in refused.value.message and "refers outside the document" in refused.value.message
    assert refused.value.details["place"] == place


def test_the_spec_validator_is_given_a_resolver_that_retrieves_nothing(pets: PetServer) -> None:
    """The second line: even a reference the walk let through is never retrieved by the validator."""
    from glovebox.importers._openapi import validate_document

    doc = _minimal()
    _schemas(doc)["A"] = {"type": "object", "default": {"$ref": f"http://127.0.0.1:{pets.server_address[1]}/x"}}
    doc["paths"]["/x"]["get"]["responses"]["default"] = {"$ref": f"http://127.0.0.1:{pets.server_address[1]}/r"}
    with pytest.raises(glovebox.InvalidSpec, match=r"\(document\): .*is not retrieved"):
        validate_document(doc, "3.1.0", "(document)")
    assert pets.seen == []
    _schemas(doc)["B"] = {"$id": f"http://127.0.0.1:{pets.server_address[1]}/b.json", "$ref": "other.json"}
    with pytest.raises(glovebox.InvalidSpec):
        validate_document({**doc, "openapi": "3.0.3"}, "3.0.3", "(document)")
    assert pets.seen == []


def test_a_ref_to_a_fifo_is_refused_without_opening_it(tmp_path: Path) -> None:
    """``glovebox import openapi --dry-run`` (the real CLI, its own process) never opens a file a $ref names."""
    import os
    import subprocess
    import sys
    import threading

    fifo = tmp_path / "x.fifo"
    os.mkfifo(fifo)
    opened, stop = threading.Event(), threading.Event()

    def writer() -> None:  # each open blocks until someone opens the FIFO for reading
        while not stop.is_set():
            with fifo.open("w") as handle:
                if not stop.is_set():
                    opened.set()
                    handle.write('{"type": "object"}')

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    doc = _minimal()
    _schemas(doc)["default"] = {"$ref": fifo.as_uri()}
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(doc))
    env = {**os.environ, "GLOVEBOX_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-m", "glovebox", "import", "openapi", str(spec), "--dry-run"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    was_opened = opened.is_set()
    stop.set()
    os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # release the writer's open
    thread.join(10)
    assert not was_opened
    assert done.returncode == 1 and done.stderr.startswith("error [invalid_spec]: "), (done.stdout, done.stderr)
    assert "/components/schemas/default/$ref: " in done.stderr and "Traceback" not in done.stdout + done.stderr


# -- deep documents are invalid_spec naming the place (issue 24, defect 3) -------------------------------


def _chain(doc: dict[str, Any], count: int) -> dict[str, Any]:
    """``count`` component schemas, each holding a ``$ref`` to the next, the first the response."""
    for index in range(count):
        _schemas(doc)[f"S{index}"] = {
            "type": "object",
            "properties": {"n": {"$ref": f"#/components/schemas/S{index + 1}"}},
        }
    _schemas(doc)[f"S{count}"] = {"type": "string"}
    response = {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/S0"}}}}
    doc["paths"]["/x"]["get"]["responses"]["200"] = response
    return doc


def test_a_chain_of_300_refs_is_invalid_spec_naming_the_place(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    path = tmp_path / "chain.json"
    path.write_text(json.dumps(_chain(_minimal(), 300)))
    with pytest.raises(
        glovebox.InvalidSpec,
        match=r"chain.json: /components/schemas/S\d+/properties/n: the schema is nested deeper than 64",
    ) as refused:
        glovebox.import_openapi(runtime, path, dry_run=True, strict=True)
    assert refused.value.details["place"].startswith("/components/schemas/S")
    out = cli_import(runtime.home, str(path), "--dry-run")  # not strict: the one operation skipped, none left
    assert out.exit_code == 1 and out.output.startswith("error [invalid_spec]: "), out.output


def test_a_chain_within_the_bound_imports_and_validates_a_deep_input(runtime: glovebox.Runtime) -> None:
    """Just inside the bound, the tool is registered and its schema validates a value as deep as it allows."""
    doc = _chain(_minimal(), 20)
    doc["paths"]["/x"]["post"] = {
        "operationId": "postX",
        "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/S0"}}}},
        "responses": {"200": {"description": "ok"}},
    }
    result = glovebox.import_openapi(runtime, doc)
    assert sorted(result.added) == ["t-get-x", "t-post-x"]
    deep: Any = "leaf"
    for _ in range(20):
        deep = {"n": deep}
    called = runtime.call("t-post-x", {"body": deep})
    assert called.code == "permission_denied"  # past validation: no policy grants it


def test_a_deeply_nested_document_is_invalid_spec(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    doc = _minimal()
    node: dict[str, Any] = {"type": "string"}
    for _ in range(500):
        node = {"type": "array", "items": node}
    _schemas(doc)["Deep"] = node
    with pytest.raises(glovebox.InvalidSpec, match=r"/components/schemas/Deep(/items)+: .*nested deeper than"):
        glovebox.import_openapi(runtime, doc, dry_run=True)
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(glovebox.InvalidSpec, match=r"deep.json: .*nested"):
        glovebox.import_openapi(runtime, path, dry_run=True)


# -- fetching a spec is bounded in all, however the server trickles (issue 24, defect 4) -------------------


class _Trickler:
    """A raw HTTP server on 127.0.0.1 that trickles its answer: header lines, or body bytes, one per 0.1 s."""

    def __init__(self, what: str) -> None:
        import socket
        import threading

        self.what = what
        self.stop = threading.Event()
        self.finished = False  # the whole answer was sent: the client waited for all of it
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/spec.yaml"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        import contextlib

        with contextlib.suppress(OSError):
            conn, _ = self.listener.accept()
            with conn:
                conn.recv(65536)
                body = SPEC.read_bytes()
                head = b"HTTP/1.1 200 OK\r\n"
                if self.what == "body":
                    head += b"Content-Length: %d\r\n\r\n" % len(body)
                conn.sendall(head)
                for index in range(600):  # at most a minute, so that a failing test still ends
                    if self.stop.wait(0.1):
                        return
                    conn.sendall(b"X-Trickle: %d\r\n" % index if self.what == "headers" else body[index : index + 1])
                if self.what == "headers":
                    conn.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
                self.finished = True

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
        self.thread.join(10)


@pytest.mark.parametrize("what", ["headers", "body"])
def test_a_trickled_spec_fetch_ends_at_the_fetch_deadline(
    what: str, runtime: glovebox.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    from glovebox.importers import _common

    monkeypatch.setattr(_common, "FETCH_TIMEOUT_S", 2.0)  # the bound under test, shorter than the trickle
    trickler = _Trickler(what)
    try:
        with pytest.raises(glovebox.InvalidSpec, match=r"spec.yaml: took over 2 s"):
            glovebox.import_openapi(runtime, trickler.url, server="https://pets.example.com/v1", dry_run=True)
    finally:
        trickler.close()
    assert not trickler.finished  # the import gave up before the server's minute of trickling ended


# -- each {param} is one segment in the grant (issue 24, defect 12) ----------------------------------------


#: Path templates and the one path pattern each is granted.
TEMPLATES = {
    "/x/{a}{b}": "/v1/x/*",
    "/y/{a}{b}{c}/z": "/v1/y/*/z",
    "/j/{a}{b}.json": "/v1/j/*.json",
    "/d/{a}-{b}": "/v1/d/*-*",
    "/s/{a}": "/v1/s/*",
}


def test_adjacent_path_parameters_are_granted_one_segment(
    pets: PetServer, runtime: glovebox.Runtime, tmp_path: Path
) -> None:
    """``/x/{a}{b}`` is granted ``/v1/x/*`` (one segment), in the rule and the policy fragment; calls reach it."""
    import re

    from glovebox.model._rules import path_matches

    doc = _minimal()
    doc["paths"] = {}
    for index, template in enumerate(TEMPLATES):
        parameters = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in re.findall(r"\{([^}]*)\}", template)
        ]
        operation = {"operationId": f"op{index}", "parameters": parameters, "responses": {"200": {"description": "ok"}}}
        doc["paths"][template] = {"get": operation}
    result = glovebox.import_openapi(runtime, doc, server=base(pets))
    granted = {info.manifest.operation.path: info.manifest.capabilities.http[0].paths for info in result.tools}  # type: ignore[union-attr]
    assert granted == {template: [pattern] for template, pattern in TEMPLATES.items()}
    assert sorted(result.policy["grants"][0]["http"][0]["paths"]) == sorted(TEMPLATES.values())
    for pattern in TEMPLATES.values():
        assert not path_matches(pattern, pattern.replace("*", "p/q", 1))  # one segment, never two
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({**result.policy, "principals": {"agent": {"scopes": ["t:read"]}}}))
    with glovebox.Runtime(home=runtime.home, policy=policy) as rt:
        for index, template in enumerate(TEMPLATES):
            names = re.findall(r"\{([^}]*)\}", template)
            called = rt.call(f"t-op{index}", {name: "ab" for name in names}, principal="agent")
            assert called.code == "guest_error", called.to_dict()  # the server refuses: no token
    expected = [re.sub(r"\{[^}]*\}", "ab", "/v1" + template) for template in TEMPLATES]
    assert [seen["path"] for seen in pets.seen] == expected


# -- what parsers accept is accepted (issue 39) -------------------------------------------------------


def test_a_property_named_ref_is_a_property(runtime: glovebox.Runtime) -> None:
    """Kubernetes' JSONSchemaProps has properties named ``$ref`` and ``$schema``."""
    doc = _minimal()
    _schemas(doc)["JSONSchemaProps"] = {
        "type": "object",
        "properties": {
            "$ref": {"type": "string"},
            "$schema": {"type": "string"},
            "properties": {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/JSONSchemaProps"}},
        },
    }
    body = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/JSONSchemaProps"}}}}
    doc["paths"]["/x"]["post"] = {
        "operationId": "postX",
        "requestBody": body,
        "responses": {"200": {"description": "ok"}},
    }
    result = glovebox.import_openapi(runtime, doc, dry_run=True, strict=True)
    assert sorted(result.added) == ["t-get-x", "t-post-x"]
    info = glovebox.import_openapi(runtime, doc).tools[1]
    props = info.manifest.input_schema["$defs"]["JSONSchemaProps"]["properties"]
    assert props["$ref"] == {"type": "string"}
    assert props["properties"]["additionalProperties"] == {"$ref": "#/$defs/JSONSchemaProps"}


def test_json_is_read_as_json_before_yaml(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    """A raw U+009F in a JSON string is JSON (Python's json reads it); YAML refuses it (SendGrid's spec)."""
    doc = _minimal()
    doc["paths"]["/x"]["get"]["summary"] = "a raw \u009f control"
    path = tmp_path / "sendgrid.json"
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(yaml.YAMLError):
        yaml.safe_load(path.read_text(encoding="utf-8"))
    result = glovebox.import_openapi(runtime, path, dry_run=True)
    assert result.added == ["t-get-x"]


def test_an_identity_escape_in_a_pattern_is_written_as_the_character(runtime: glovebox.Runtime) -> None:
    """DigitalOcean's ``\\:`` (PCRE and Python accept it; ECMA-262's unicode mode does not): the same language."""
    doc = _minimal()
    schema = {"type": "object", "properties": {"urn": {"type": "string", "pattern": r"^do\:droplet\:\d+$"}}}
    doc["paths"]["/x"]["get"]["responses"]["200"] = {
        "description": "ok",
        "content": {"application/json": {"schema": schema}},
    }
    result = glovebox.import_openapi(runtime, doc, strict=True)
    output = result.tools[0].manifest.output_schema
    assert output["properties"]["urn"]["pattern"] == r"^do:droplet:\d+$"  # type: ignore[index]


def test_an_api_imported_under_the_longer_title_name_keeps_it(runtime: glovebox.Runtime) -> None:
    """Before short names, ``Petstore API`` made ``petstore-api``: a re-import changes those tools."""
    spec = yaml.safe_load(SPEC.read_text())
    spec["info"]["title"] = "Petstore API"
    first = glovebox.import_openapi(runtime, spec, name="petstore-api", server="https://pets.example.com/v1")
    again = glovebox.import_openapi(runtime, spec, server="https://pets.example.com/v1", dry_run=True)
    assert again.api == "petstore-api" and again.added == [] and len(again.unchanged) == len(first.added)
    assert "kept the API name 'petstore-api' of the tools already imported" in again.notes[0]
    other = glovebox.Runtime(home=runtime.home / "other")
    with other:
        assert (
            glovebox.import_openapi(other, spec, server="https://pets.example.com/v1", dry_run=True).api == "petstore"
        )
