"""Real, published descriptions imported (trimmed copies under tests/data/, with their licences) and their
operations called against a local server on 127.0.0.1 that answers the description's own examples."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import glovebox
from glovebox.cli._main import cli

from ..capabilities.test_http import QuietHandler, in_thread

GITHUB = Path(__file__).parents[1] / "data" / "github" / "api.github.com.trimmed.json"
PRINCIPALS = {"agent": {"scopes": ["github:read", "github:write"]}}


def _example(name: str) -> Any:
    return json.loads(GITHUB.read_text())["components"]["examples"][name]["value"]


class ExampleHandler(QuietHandler):
    """Answers each GitHub path with the description's own example for it."""

    server: ExampleServer

    def do_GET(self) -> None:
        self.server.seen.append(self.path)
        answers = {
            "/repos/vercel/next.js": "full-repository-default-response",
            "/repos/vercel/next.js/contents/README.md": "content-file-response-if-content-is-a-file",
        }
        name = answers.get(self.path.partition("?")[0])
        if name is None:
            self._reply(404, b'{"message": "Not Found"}', {"Content-Type": "application/json"})
            return
        self._reply(200, json.dumps(_example(name)).encode(), {"Content-Type": "application/json"})

    def do_POST(self) -> None:
        self.server.seen.append(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.uploads.append((self.headers.get("Content-Type"), body))
        answer = json.dumps(_example("release-asset-response-for-successful-upload")).encode()
        self._reply(201, answer, {"Content-Type": "application/json"})


#: A release asset's bytes (a zip file's first bytes, then every byte value).
ZIP = b"PK\x03\x04" + bytes(range(256))


class ExampleServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    seen: list[str]
    uploads: list[tuple[str | None, bytes]]


@pytest.fixture
def examples() -> Iterator[ExampleServer]:
    httpd = ExampleServer(("127.0.0.1", 0), ExampleHandler)
    httpd.seen, httpd.uploads = [], []
    with in_thread(httpd):
        yield httpd


def test_github_imports_what_it_can_and_reports_the_rest(runtime: glovebox.Runtime) -> None:
    result = glovebox.import_openapi(runtime, GITHUB, dry_run=True)
    assert result.api == "github"
    assert result.skipped == []
    assert "github-markdown-render-raw" in result.added  # a text/plain body
    assert "github-repos-upload-release-asset" in result.added  # an application/octet-stream body
    assert len(result.added) == 11 and all(len(name) <= 64 for name in result.added)
    # too long: words already said and filler words left out, never cut mid-word
    assert "github-actions-get-cache-retention-limit-organization" in result.added
    assert "github-actions-get-actions-cache-retention-limit-for-repository" in result.added  # fits as it is
    collided = sorted(n for n in result.added if n.startswith("github-actions-get-fork-pr"))
    assert len(collided) == 2 and len({name[-8:] for name in collided}) == 2
    assert all(name[:-9] == "github-actions-get-fork-pr-contributor-approval" for name in collided)
    assert result.notes == [
        "2 operations make the tool name 'github-actions-get-fork-pr-contributor-approval-permissions': "
        f"named {', '.join(collided)}"
    ]
    again = glovebox.import_openapi(runtime, GITHUB, dry_run=True)
    assert again.added == result.added  # the same names every time


def test_github_include_and_exclude_select_operations(runtime: glovebox.Runtime) -> None:
    by_tag = glovebox.import_openapi(runtime, GITHUB, include=["issues"], dry_run=True)
    assert sorted(by_tag.added) == ["github-issues-create", "github-issues-list-for-repo"]
    by_path = glovebox.import_openapi(runtime, GITHUB, include=["/repos/*"], exclude=["issues/*"], dry_run=True)
    assert sorted(by_path.added) == [
        "github-actions-get-actions-cache-retention-limit-for-repository",
        "github-actions-get-fork-pr-contributor-approval-permissions",  # alone: no collision, no suffix
        "github-repos-get",
        "github-repos-get-content",
        "github-repos-upload-release-asset",
    ]
    assert by_path.skipped == []


def test_github_input_schemas_hold_only_the_defs_they_reach(runtime: glovebox.Runtime) -> None:
    tools = {
        info.name: info for info in glovebox.import_openapi(runtime, GITHUB, server="https://api.github.com").tools
    }
    repos_get = tools["github-repos-get"].manifest
    assert "$defs" not in repos_get.input_schema
    assert sorted(repos_get.input_schema["properties"]) == ["owner", "repo"]
    assert len(json.dumps(repos_get.input_schema)) < 1000
    output = repos_get.output_schema
    assert isinstance(output, dict) and output["$ref"] == "#/$defs/full-repository"
    assert set(output["$defs"]) >= {"full-repository", "simple-user", "repository"}
    create = tools["github-issues-create"].manifest
    assert "$defs" not in create.input_schema  # its output's issue, user, label... stay in the output
    assert set(create.output_schema["$defs"]) >= {"issue", "simple-user"}  # type: ignore[index]


def test_github_calls_reach_the_server_with_unreserved_characters_as_they_are(
    runtime: glovebox.Runtime, examples: ExampleServer, tmp_path: Path
) -> None:
    server = f"http://127.0.0.1:{examples.server_address[1]}"
    fragment = tmp_path / "fragment.yaml"
    out = CliRunner().invoke(
        cli,
        [
            "--home",
            str(runtime.home),
            "import",
            "openapi",
            str(GITHUB),
            "--server",
            server,
            "--policy-out",
            str(fragment),
        ],
    )
    assert out.exit_code == 0, out.output
    assert "skipped" not in out.output
    policy = tmp_path / "policy.yaml"
    document = yaml.safe_dump({**yaml.safe_load(fragment.read_text()), "principals": PRINCIPALS})
    policy.write_text(document.replace("require_approval", "allow"))
    with glovebox.Runtime(home=runtime.home, policy=policy) as rt:
        content = rt.call(
            "github-repos-get-content", {"owner": "vercel", "repo": "next.js", "path": "README.md"}, principal="agent"
        )
        assert content.ok, content.error
        assert content.output == _example("content-file-response-if-content-is-a-file")
        repo = rt.call("github-repos-get", {"owner": "vercel", "repo": "next.js"}, principal="agent")
        assert examples.seen == ["/repos/vercel/next.js/contents/README.md", "/repos/vercel/next.js"]
        assert repo.ok or (repo.error is not None and repo.error.code == "invalid_output")
        for attack in ("..", "%2e%2e", "%2F", "a/b", "."):
            refused = rt.call("github-repos-get", {"owner": "vercel", "repo": attack}, principal="agent")
            assert refused.error is not None and refused.error.code == "capability_denied", attack
        assert len(examples.seen) == 2
        asset = rt.call(
            "github-repos-upload-release-asset",
            {"owner": "o", "repo": "r", "release_id": 1, "name": "a b.zip", "body": base64.b64encode(ZIP).decode()},
            principal="agent",
        )
        assert asset.ok, asset.error
        assert asset.output == _example("release-asset-response-for-successful-upload")
        assert examples.seen[-1] == "/repos/o/r/releases/1/assets?name=a%20b.zip"
        assert examples.uploads == [("application/octet-stream", ZIP)]


def test_github_operation_servers_are_their_own(runtime: glovebox.Runtime) -> None:
    """An operation's own servers win over the document's: release assets go to uploads.github.com."""
    tools = {info.name: info.manifest for info in glovebox.import_openapi(runtime, GITHUB).tools}
    upload = tools["github-repos-upload-release-asset"]
    assert upload.operation is not None and upload.operation.url == "https://uploads.github.com"
    assert [rule.host for rule in upload.capabilities.http] == ["uploads.github.com"]
    assert tools["github-repos-get"].capabilities.http[0].host == "api.github.com"
