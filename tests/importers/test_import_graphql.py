"""``glovebox import graphql`` end to end: an SDL schema, a real GraphQL server on 127.0.0.1 (graphql-core executes)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from graphql import build_schema, graphql_sync, introspection_from_schema

import glovebox
from glovebox.cli._main import cli
from glovebox.runtime import _selection
from glovebox.runtime._selection import schema_file

from ..capabilities.test_http import QuietHandler, in_thread

SDL = Path(__file__).parents[1] / "fixtures" / "petstore.graphql"
PETS = {"1": {"id": "1", "name": "Rex", "kind": "DOG", "owner": {"name": "Ann", "best": None}, "parent": None}}


class Root:
    deleted: list[str]

    def pet(self, info: Any, id: str) -> Any:
        return PETS.get(id)

    def pets(self, info: Any, limit: int = 10, kind: str | None = None) -> Any:
        return list(PETS.values())[:limit]

    def deletePet(self, info: Any, id: str) -> bool:  # noqa: N802 - the schema's field name
        self.deleted.append(id)
        return True

    def addPet(self, info: Any, input: dict[str, Any]) -> Any:  # noqa: N802
        return {"id": "9", **input, "owner": None}


class GraphqlHandler(QuietHandler):
    server: GraphqlServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.server.seen.append(body)
        self.server.headers.append(dict(self.headers))
        if self.path != "/graphql":
            self._reply(404, b"{}")
            return
        result = graphql_sync(self.server.schema, body["query"], self.server.root, variable_values=body["variables"])
        answer: dict[str, Any] = {"data": result.data}
        if result.errors:
            answer["errors"] = [error.formatted for error in result.errors]
        self._reply(200, json.dumps(answer).encode(), {"Content-Type": "application/json"})


class GraphqlServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    seen: list[dict[str, Any]]
    headers: list[dict[str, str]]
    schema: Any
    root: Any


@pytest.fixture
def gql() -> Iterator[GraphqlServer]:
    httpd = GraphqlServer(("127.0.0.1", 0), GraphqlHandler)
    httpd.seen, httpd.headers, httpd.schema, httpd.root = [], [], build_schema(SDL.read_text()), Root()
    httpd.root.deleted = []
    with in_thread(httpd):
        yield httpd


def endpoint(server: GraphqlServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/graphql"


@pytest.fixture
def imported(gql: GraphqlServer, tmp_path: Path) -> Iterator[glovebox.Runtime]:
    home, fragment = tmp_path / "home", tmp_path / "fragment.yaml"
    args = [
        "--home",
        str(home),
        "import",
        "graphql",
        str(SDL),
        "--endpoint",
        endpoint(gql),
        "--policy-out",
        str(fragment),
    ]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    assert "4 added" in out.output
    policy = yaml.safe_load(fragment.read_text())
    policy["principals"] = {
        "agent": {"scopes": ["petstore:read", "petstore:write"]},
        "boss": {"scopes": ["glovebox:approve"]},
    }
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(policy))
    with glovebox.Runtime(home=home, policy=tmp_path / "policy.yaml") as rt:
        yield rt


def test_a_query_field_is_a_read_tool(imported: glovebox.Runtime, gql: GraphqlServer) -> None:
    result = imported.call("petstore-pet", {"id": "1"}, principal="agent")
    assert result.ok, result.error
    assert result.output == {"id": "1", "name": "Rex", "kind": "DOG", "owner": {"name": "Ann"}}
    assert gql.seen[-1]["variables"] == {"id": "1"}
    assert imported.tool("petstore-pet").manifest.required_scopes == ["petstore:read"]


def test_the_selection_is_bounded_and_cuts_cycles(imported: glovebox.Runtime) -> None:
    query = imported.tool("petstore-pet").manifest.operation.graphql.query  # type: ignore[union-attr]
    assert query == "query Pet($id: ID!) { pet(id: $id) { id name kind owner { name } } }"
    assert "parent" not in query and "pets(first" not in query


def test_a_mutation_waits_for_approval(imported: glovebox.Runtime, gql: GraphqlServer) -> None:
    first = imported.call("petstore-delete-pet", {"id": "1"}, principal="agent")
    assert first.error is not None and first.error.code == "approval_required"
    assert gql.seen == []
    imported.approve(first.error.details["approval_id"], principal="boss")
    assert imported.call("petstore-delete-pet", {"id": "1"}, principal="agent").output is True
    assert gql.root.deleted == ["1"]


def test_input_objects_and_enums_are_validated(imported: glovebox.Runtime, gql: GraphqlServer) -> None:
    result = imported.call("petstore-add-pet", {"input": {"name": "Tom", "kind": "COW"}}, principal="agent")
    assert result.error is not None and result.error.code == "invalid_input"
    result = imported.call("petstore-add-pet", {"input": {"kind": "CAT"}}, principal="agent")
    assert result.error is not None and result.error.code == "invalid_input"
    assert gql.seen == []


def test_a_graphql_errors_array_is_a_guest_error(imported: glovebox.Runtime, gql: GraphqlServer) -> None:
    gql.schema = build_schema(SDL.read_text().replace("pet(id: ID!): Pet", "pet(id: ID!, extra: Int!): Pet"))
    result = imported.call("petstore-pet", {"id": "1"}, principal="agent")
    assert result.error is not None and result.error.code == "guest_error"
    assert result.error.message.startswith("GraphQL errors: ")
    assert "extra" in result.error.message


def test_an_introspection_result_imports_like_the_sdl(
    gql: GraphqlServer, runtime: glovebox.Runtime, tmp_path: Path
) -> None:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps({"data": introspection_from_schema(build_schema(SDL.read_text()))}))
    result = glovebox.import_graphql(runtime, path, endpoint=endpoint(gql), name="petstore")
    assert sorted(result.added) == ["petstore-add-pet", "petstore-delete-pet", "petstore-pet", "petstore-pets"]
    assert result.policy["rules"][0] == {"tool": "petstore-pet", "action": "allow", "reason": "GraphQL Query.pet: read"}


def test_a_schema_that_does_not_parse_names_the_line(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    path = tmp_path / "bad.graphql"
    path.write_text("type Query {\n  pet(id: ID!): Pet\n  oops(: Int\n}\n")
    with pytest.raises(glovebox.InvalidSpec, match=r"bad.graphql: line 3, column 8: Syntax Error"):
        glovebox.import_graphql(runtime, path, endpoint="https://api.example.com/graphql")
    out = CliRunner().invoke(
        cli, ["--home", str(runtime.home), "import", "graphql", str(path), "--endpoint", "https://a.example.com/g"]
    )
    assert out.exit_code == 1 and out.output.startswith("error [invalid_spec]: ")
    assert runtime.tools() == []


def test_a_schema_naming_an_unknown_type_is_refused(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    path = tmp_path / "bad.graphql"
    path.write_text("type Query {\n  pet: Nope\n}\n")
    with pytest.raises(glovebox.InvalidSpec, match="Unknown type 'Nope'"):
        glovebox.import_graphql(runtime, path, endpoint="https://api.example.com/graphql")


# -- deep and big schemas are invalid_spec naming the place (issue 24, defects 3 and 4) --------------------


def _import(runtime: glovebox.Runtime, path: Path, **options: Any) -> glovebox.ImportResult:
    return glovebox.import_graphql(runtime, path, endpoint="https://api.example.com/graphql", **options)


def _nested_inputs(count: int) -> str:
    types = [f"input I{i} {{ n: I{i + 1} }}" for i in range(count)]
    return "\n".join([*types, f"input I{count} {{ x: Int }}", "type Query { f(a: I0): Int }", ""])


@pytest.mark.slow  # a 3000-deep schema parsed
def test_3000_nested_input_types_are_invalid_spec_naming_the_argument(
    runtime: glovebox.Runtime, tmp_path: Path
) -> None:
    path = tmp_path / "deep.graphql"
    path.write_text(_nested_inputs(3000))
    assert 70_000 < path.stat().st_size < 80_000
    with pytest.raises(
        glovebox.InvalidSpec, match=r"deep.graphql: Query.f\(a\): input type I\d+ is nested deeper than 64"
    ) as refused:
        _import(runtime, path, dry_run=True)
    assert refused.value.details["place"].endswith("Query.f(a)")
    out = CliRunner().invoke(
        cli, ["--home", str(runtime.home), "import", "graphql", str(path), "--endpoint", "https://a.example.com/g"]
    )
    assert out.exit_code == 1 and out.output.startswith("error [invalid_spec]: "), out.output


def test_nested_input_types_within_the_bound_import(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    path = tmp_path / "nested.graphql"
    path.write_text(_nested_inputs(30))
    result = _import(runtime, path, dry_run=True)
    assert result.added == ["nested-f"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("type Query { f(a: " + "[" * 3000 + "Int" + "]" * 3000 + "): Int }\n", "line 1, column .*nested too deeply"),
        (
            "type Query { f(a: " + "[" * 70 + "Int" + "]" * 70 + "): Int }\n",
            r"Query.f\(a\): input type .* nested deeper",
        ),
        ("type Query { f: Int }\n" + "# x\n" * 2_300_000, "over the 8388608-byte spec limit"),
    ],
    ids=["list-wrappers-past-the-parser", "list-wrappers-past-the-bound", "8.7-MiB-of-comments"],
)
def test_deep_or_huge_sdl_is_invalid_spec(runtime: glovebox.Runtime, tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "schema.graphql"
    path.write_text(text)
    with pytest.raises(glovebox.InvalidSpec, match=message):
        _import(runtime, path, dry_run=True, max_spec_bytes=8 * 1024 * 1024)


def test_a_huge_or_deep_introspection_result_is_invalid_spec(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    path = tmp_path / "schema.json"
    path.write_text('{"data": ' + " " * (8 * 1024 * 1024) + "{}}")
    with pytest.raises(glovebox.InvalidSpec, match="over the 8388608-byte spec limit"):
        _import(runtime, path, dry_run=True, max_spec_bytes=8 * 1024 * 1024)
    wrapped: Any = {"kind": "SCALAR", "name": "Int"}
    for _ in range(3000):
        wrapped = {"kind": "LIST", "name": None, "ofType": wrapped}
    introspection = introspection_from_schema(build_schema("type Query { f(a: Int): Int }"))
    query = next(t for t in introspection["__schema"]["types"] if t["name"] == "Query")  # type: ignore[index]
    query["fields"][0]["args"][0]["type"] = wrapped
    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)  # only to write the file: json.dumps recurses too
    try:
        path.write_text(json.dumps({"data": introspection}))
    finally:
        sys.setrecursionlimit(limit)
    with pytest.raises(glovebox.InvalidSpec, match="schema.json: .*nested too deeply"):
        _import(runtime, path, dry_run=True)


def test_a_fifo_is_refused_as_a_schema_without_blocking(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    import os

    path = tmp_path / "schema.graphql"
    os.mkfifo(path)
    with pytest.raises(glovebox.InvalidSpec, match="schema.graphql: not a regular file"):
        _import(runtime, path, dry_run=True)


def test_the_selection_depth_has_the_clis_bound_in_the_library(runtime: glovebox.Runtime) -> None:
    with pytest.raises(ValueError, match="depth must be from 1 to 8, not 9"):
        _import(runtime, SDL, depth=9, dry_run=True)
    assert _import(runtime, SDL, depth=8, dry_run=True).added


# -- the agent chooses the fields; partial errors; authentication (issue 39, item 9) ----------------------


def test_the_agent_chooses_the_fields_of_the_answer(imported: glovebox.Runtime, gql: GraphqlServer) -> None:
    chosen = imported.call("petstore-pet", {"id": "1", "fields": "name owner { name best { id } }"}, principal="agent")
    braced = imported.call("petstore-pet", {"id": "1", "fields": "{ kind }"}, principal="agent")
    listed = imported.call("petstore-pets", {"fields": "id owner { pets(first: 1) { name } }"}, principal="agent")
    assert chosen.ok, chosen.to_dict()
    assert chosen.output == {"name": "Rex", "owner": {"name": "Ann", "best": None}}
    assert gql.seen[0]["variables"] == {"id": "1"}  # the selection is the document, never a variable
    assert "best {" in gql.seen[0]["query"] and "kind" not in gql.seen[0]["query"]
    assert braced.ok and braced.output == {"kind": "DOG"}, braced.to_dict()
    assert listed.ok, listed.to_dict()
    schema = imported.tool("petstore-pet").manifest.input_schema
    assert "id name kind owner { name }" in schema["properties"]["fields"]["description"]  # the default is shown
    assert "fields" not in imported.tool("petstore-delete-pet").manifest.input_schema["properties"]  # a Boolean


BAD_SELECTIONS = [
    ("nope", "Cannot query field 'nope' on type 'Pet'"),
    ("name { first }", "must not have a selection"),
    ("owner", "must have a selection of subfields"),
    ('name } } mutation M { deletePet(id: "1") } query Q { pet(id: "1") { name', "not a GraphQL selection set"),
    ('name } mutation M { deletePet(id: "1") }', "not a GraphQL selection set"),
    ('{ name } mutation M { deletePet(id: "1") }', "no operations, fragments or variables"),
    ("{ name } fragment F on Pet { id }", "no operations, fragments or variables"),
    ("...F", "fragment spreads are refused"),
    ("query Q { name }", "Cannot query field 'query' on type 'Pet'"),
    ("owner { pets(first: 1) { " * 9 + "name" + " } }" * 9, "deeper than 8 levels"),
    (" ".join(f"a{i}: name" for i in range(501)), "more than 500 fields"),
    ("{ }", "names no field"),
    ("x" * 8193, "is longer than 8192 characters"),  # the input schema's bound
]


@pytest.mark.parametrize(("fields", "reason"), BAD_SELECTIONS)
def test_a_selection_the_schema_or_the_bounds_refuse_is_invalid_input(
    imported: glovebox.Runtime, gql: GraphqlServer, fields: str, reason: str
) -> None:
    result = imported.call("petstore-pet", {"id": "1", "fields": fields}, principal="agent")
    assert result.error is not None and result.error.code == "invalid_input", result.to_dict()
    assert reason in result.error.message
    assert gql.seen == [] and gql.root.deleted == []


def test_a_partial_error_answers_the_data_and_the_errors(
    imported: glovebox.Runtime, gql: GraphqlServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def hidden(info: Any) -> Any:
        raise ValueError("the owner is not visible to this token")

    monkeypatch.setitem(PETS, "3", {"id": "3", "name": "Tom", "kind": "CAT", "owner": hidden, "parent": None})
    partial = imported.call("petstore-pet", {"id": "3"}, principal="agent")
    whole = imported.call("petstore-pet", {"id": "1"}, principal="agent")
    assert partial.ok, partial.to_dict()
    assert partial.output["data"] == {"id": "3", "name": "Tom", "kind": "CAT", "owner": None}
    [error] = partial.output["errors"]
    assert error["message"] == "the owner is not visible to this token" and error["path"] == ["pet", "owner"]
    assert whole.ok and "errors" not in whole.output  # no errors: the field's value, as before


def test_bearer_and_header_secrets_are_injected_by_the_host(
    gql: GraphqlServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    args = ["--home", str(home), "import", "graphql", str(SDL), "--endpoint", endpoint(gql)]
    auth = [
        "--bearer-env",
        "PETS_TOKEN",
        "--header-env",
        "X-Api-Key=PETS_KEY",
        "--policy-out",
        str(tmp_path / "f.yaml"),
    ]
    out = CliRunner().invoke(cli, [*args, *auth])
    assert out.exit_code == 0, out.output
    assert "secret: set PETS_TOKEN (Authorization: Bearer <PETS_TOKEN>)" in out.output
    assert "secret: set PETS_KEY (X-Api-Key: <PETS_KEY>)" in out.output
    policy = yaml.safe_load((tmp_path / "f.yaml").read_text())
    policy["principals"] = {"agent": {"scopes": ["petstore:read"]}}
    monkeypatch.setenv("PETS_TOKEN", "tok-3e8c")
    monkeypatch.setenv("PETS_KEY", "key-77a1")
    with glovebox.Runtime(home=home, policy=glovebox.Policy.model_validate(policy)) as rt:
        result = rt.call("petstore-pet", {"id": "1", "fields": "name"}, principal="agent")
        manifest = rt.tool("petstore-pet").manifest.to_json()
    assert result.ok and result.output == {"name": "Rex"}, result.to_dict()
    assert gql.headers[0]["Authorization"] == "Bearer tok-3e8c" and gql.headers[0]["X-Api-Key"] == "key-77a1"
    assert "tok-3e8c" not in json.dumps(result.to_dict()) and "PETS_TOKEN" not in manifest
    bad = CliRunner().invoke(cli, [*args, "--header-env", "X-Api-Key"])
    assert bad.exit_code == 2 and "expected HEADER=VAR" in bad.output


def test_a_bearer_secret_reference_is_read_by_the_host_where_it_points(
    gql: GraphqlServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    args = ["--home", str(home), "import", "graphql", str(SDL), "--endpoint", endpoint(gql)]
    out = CliRunner().invoke(
        cli, [*args, "--bearer-secret", "env://PETS_TOKEN", "--policy-out", str(tmp_path / "f.yaml")]
    )
    assert out.exit_code == 0, out.output
    assert "secret: from env://PETS_TOKEN (Authorization: Bearer <env://PETS_TOKEN>)" in out.output
    policy = yaml.safe_load((tmp_path / "f.yaml").read_text())
    [secret] = policy["grants"][0]["secrets"]
    assert secret["source"] == "env://PETS_TOKEN" and "provider" not in secret
    policy["principals"] = {"agent": {"scopes": ["petstore:read"]}}
    monkeypatch.setenv("PETS_TOKEN", "tok-51d0")
    with glovebox.Runtime(home=home, policy=glovebox.Policy.model_validate(policy)) as rt:
        result = rt.call("petstore-pet", {"id": "1", "fields": "name"}, principal="agent")
    assert result.ok and result.output == {"name": "Rex"}, result.to_dict()
    assert gql.headers[0]["Authorization"] == "Bearer tok-51d0"
    assert "tok-51d0" not in json.dumps(result.to_dict())
    # An OAuth connection per principal: the import says how to make it.
    dry = CliRunner().invoke(cli, [*args, "--dry-run", "--bearer-secret", "connection://petstore/{principal}"])
    assert dry.exit_code == 0, dry.output
    assert "secret: glovebox connect petstore --account PRINCIPAL, for each principal" in dry.output
    # Not a reference, or two bearers: refused, naming the option's value.
    plain = CliRunner().invoke(cli, [*args, "--bearer-secret", "PETS_TOKEN"])
    assert plain.exit_code == 2 and "'PETS_TOKEN' is not a secret reference" in plain.output
    both = CliRunner().invoke(cli, [*args, "--bearer-secret", "env://A", "--bearer-env", "A"])
    assert both.exit_code == 2 and "--bearer-env or --bearer-secret, not both" in both.output


def test_a_tampered_schema_in_the_home_refuses_selections(
    imported: glovebox.Runtime, gql: GraphqlServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_selection, "_BUILT", {})  # no schema built before: this one is read from the home
    digest = imported.tool("petstore-pet").manifest.operation.graphql.schema_digest  # type: ignore[union-attr]
    path = schema_file(imported.home, str(digest))
    path.write_text(path.read_text().replace("name: String!", "name: String!\n  secret: String"))
    tampered = imported.call("petstore-pet", {"id": "1", "fields": "secret"}, principal="agent")
    plain = imported.call("petstore-pet", {"id": "1"}, principal="agent")
    assert tampered.error is not None and tampered.error.code == "invalid_input"
    assert "was changed: import the API again" in tampered.error.message
    assert plain.ok  # without a selection the import's own document is sent
