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
    schema: Any
    root: Root


@pytest.fixture
def gql() -> Iterator[GraphqlServer]:
    httpd = GraphqlServer(("127.0.0.1", 0), GraphqlHandler)
    httpd.seen, httpd.schema, httpd.root = [], build_schema(SDL.read_text()), Root()
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
