"""GitHub's published GraphQL schema (npm ``@octokit/graphql-schema``, a copy under tests/data with its
licence) imported whole, and its ``repository`` tool called against a real GraphQL server on 127.0.0.1
(graphql-core executing the same schema) with fields the agent chose, a partial error and a bearer token."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from graphql import GraphQLError, build_schema, graphql_sync

import glovebox

from ..capabilities.test_http import QuietHandler, in_thread

SCHEMA = Path(__file__).parents[1] / "data" / "github-graphql" / "schema.graphql"
TOKEN = "ghp-test-token-never-shown"

pytestmark = [pytest.mark.slow, pytest.mark.system]


def _description(info: Any) -> str:
    raise GraphQLError("Resource not accessible by integration", extensions={"type": "FORBIDDEN"})


REPOSITORY = {
    "name": "next.js",
    "stargazerCount": 131000,
    "description": _description,
    "owner": {"__typename": "Organization", "login": "vercel"},
    "issues": {"totalCount": 2, "nodes": [{"title": "Build fails"}, {"title": "Docs typo"}]},
}


class Root:
    def repository(self, info: Any, owner: str, name: str, followRenames: bool = True) -> Any:  # noqa: N803
        return REPOSITORY if (owner, name) == ("vercel", "next.js") else None


class GithubHandler(QuietHandler):
    server: GithubServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.server.seen.append({"body": body, "authorization": self.headers.get("Authorization")})
        result = graphql_sync(self.server.schema, body["query"], Root(), variable_values=body["variables"])
        answer: dict[str, Any] = {"data": result.data}
        if result.errors:
            answer["errors"] = [error.formatted for error in result.errors]
        self._reply(200, json.dumps(answer).encode(), {"Content-Type": "application/json"})


class GithubServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    seen: list[dict[str, Any]]
    schema: Any


@pytest.fixture(scope="module")
def github() -> Iterator[GithubServer]:
    httpd = GithubServer(("127.0.0.1", 0), GithubHandler)
    httpd.seen, httpd.schema = (
        [],
        build_schema(SCHEMA.read_text(encoding="utf-8"), assume_valid_sdl=True, assume_valid=True),
    )
    with in_thread(httpd):
        yield httpd


@pytest.fixture(scope="module")
def imported(github: GithubServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, glovebox.ImportResult]:
    home = tmp_path_factory.mktemp("github-graphql") / "home"
    endpoint = f"http://127.0.0.1:{github.server_address[1]}/graphql"
    started = time.perf_counter()
    with glovebox.Runtime(home=home) as rt:
        result = glovebox.import_graphql(rt, SCHEMA, endpoint=endpoint, name="github", bearer_env="GITHUB_TOKEN")
    print(f"GitHub's GraphQL schema: {len(result.added)} tools in {time.perf_counter() - started:.1f} s")
    return home, result


@pytest.fixture
def rt(imported: tuple[Path, glovebox.ImportResult], monkeypatch: pytest.MonkeyPatch) -> Iterator[glovebox.Runtime]:
    home, result = imported
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    policy = {**result.policy, "principals": {"agent": {"scopes": ["github:read"]}}}
    for grant in policy["grants"]:
        grant["http"] = [{**rule, "allow_private": True} for rule in grant.get("http", [])]
    with glovebox.Runtime(home=home, policy=glovebox.Policy.model_validate(policy)) as runtime:
        yield runtime


def test_the_duplicate_fields_of_the_published_schema_are_notes(imported: tuple[Path, glovebox.ImportResult]) -> None:
    _, result = imported
    duplicated = [note for note in result.notes if "is defined twice" in note]
    assert [note.split(": ")[1].split(" ")[0] for note in duplicated] == [
        "EnterpriseOwnerInfo.repositoryDeployKeySetting",
        "EnterpriseOwnerInfo.repositoryDeployKeySettingOrganizations",
    ]
    assert len(result.added) > 250 and {"github-repository", "github-add-star"} <= set(result.added)
    assert [hint.env for hint in result.secrets] == ["GITHUB_TOKEN"]


def test_the_agent_chooses_fields_of_githubs_repository(rt: glovebox.Runtime, github: GithubServer) -> None:
    github.seen.clear()
    fields = "name stargazerCount owner { login } issues(first: 2) { totalCount nodes { title } }"
    result = rt.call("github-repository", {"owner": "vercel", "name": "next.js", "fields": fields}, principal="agent")
    assert result.ok, result.to_dict()
    assert result.output == {
        "name": "next.js",
        "stargazerCount": 131000,
        "owner": {"login": "vercel"},
        "issues": {"totalCount": 2, "nodes": [{"title": "Build fails"}, {"title": "Docs typo"}]},
    }
    [request] = github.seen
    assert request["authorization"] == f"Bearer {TOKEN}"
    assert request["body"]["variables"] == {"owner": "vercel", "name": "next.js"}
    assert TOKEN not in json.dumps(result.to_dict())
    schema = rt.tool("github-repository").manifest.input_schema
    assert len(json.dumps(schema)) < 4000  # the default selection is described in part, not pasted whole


def test_githubs_schema_refuses_a_field_it_does_not_have(rt: glovebox.Runtime, github: GithubServer) -> None:
    github.seen.clear()
    result = rt.call(
        "github-repository", {"owner": "vercel", "name": "next.js", "fields": "nme owner { login }"}, principal="agent"
    )
    assert result.error is not None and result.error.code == "invalid_input"
    assert "Cannot query field 'nme' on type 'Repository'. Did you mean 'name'?" in result.error.message
    assert github.seen == []


def test_a_forbidden_field_is_a_partial_error_beside_the_data(rt: glovebox.Runtime) -> None:
    fields = "name description owner { login }"
    result = rt.call("github-repository", {"owner": "vercel", "name": "next.js", "fields": fields}, principal="agent")
    assert result.ok, result.to_dict()
    assert result.output["data"] == {"name": "next.js", "description": None, "owner": {"login": "vercel"}}
    [error] = result.output["errors"]
    assert error["path"] == ["repository", "description"]
    assert error["extensions"] == {"type": "FORBIDDEN"}
