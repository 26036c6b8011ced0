"""A remote MCP server protected by OAuth: discovered (RFC 9728 from its 401), connected per account,
imported by glovebox and called through the official MCP client with each principal's own token.

The server is the official SDK's ``MCPServer`` with its bearer-token middleware and protected-resource
metadata; its tokens come from the Authlib authorization server of ``oauthserver``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer

import glovebox
from glovebox.connections import access_token
from glovebox.importers import import_mcp

from ..conftest import _free_port
from .conftest import Served
from .oauthserver import AuthServer
from .test_connections_import import connect_by_name

pytestmark = pytest.mark.system


class Verifier:
    """The MCP server's token check: a live token of the authorization server, for this server."""

    def __init__(self, auth: AuthServer) -> None:
        self.auth = auth

    async def verify_token(self, token: str) -> AccessToken | None:
        found = self.auth.live(token)
        if found is None:
            return None
        scopes = found.scope.split() if found.scope else []
        return AccessToken(
            token=token, client_id=found.client_id, scopes=scopes, resource=found.resource, subject=found.user
        )


@pytest.fixture
def notes(served: Served) -> Iterator[str]:
    import uvicorn

    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    settings = AuthSettings(issuer_url=served.url, resource_server_url=url, validate_token_resource=True)
    server = MCPServer("Notes", token_verifier=Verifier(served.auth), auth=settings)

    def whoami() -> dict[str, str]:
        """Who the token says the caller is."""
        token = get_access_token()
        return {"user": token.subject or "" if token else "", "token": token.token if token else ""}

    server.add_tool(whoami, description="Who the token says the caller is (and the token: a hostile echo).")

    @server.resource("notes://me", name="me", description="Whose notes these are", mime_type="text/plain")
    def me() -> str:
        token = get_access_token()
        return f"notes of {token.subject if token else 'nobody'}"

    @server.prompt(name="greet", description="A greeting for the token's user")
    def greet() -> str:
        token = get_access_token()
        return f"hello {token.subject if token else 'nobody'}"

    app = uvicorn.Server(uvicorn.Config(server.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=app.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not app.started:
        assert thread.is_alive() and time.monotonic() < deadline
        time.sleep(0.01)
    yield url
    app.should_exit = True
    thread.join(10)


def test_a_remote_mcp_server_behind_oauth_is_imported_and_called_with_each_principals_token(
    served: Served, notes: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for user, account in (("admin", "default"), ("alice", "alice"), ("bob", "bob")):
        answer = served.authorize_as(user, served.begin(account=account, name="notes", resource=notes))
        assert answer.status_code == 200, answer.text
    record = served.store().get("notes", "alice")
    assert record.resource == notes and record.issuer == served.url, "found from the server's 401 (RFC 9728)"
    tokens = [access_token(served.store(), "notes", account)[0] for account in ("default", "alice", "bob")]
    with glovebox.Runtime(home=served.home) as rt:
        secret = ["Authorization=connection://notes/{principal}"]
        imported = import_mcp(rt, notes, name="notes", scopes=[], header_secrets=secret)
        names = sorted(tool.name for tool in imported.tools)
        assert names == ["notes-get-prompt", "notes-read-resource", "notes-whoami"]
        monkeypatch.setenv("GLOVEBOX_HOME", str(tmp_path / "elsewhere"))  # a call reads the Runtime's home
        seen = {}
        for principal in ("alice", "bob"):
            result = rt.call("notes-whoami", {}, principal=principal)
            assert result.ok, result.to_dict()
            seen[principal] = result.output
            assert not any(token in json.dumps(result.to_dict()) for token in tokens)
        nobody = rt.call("notes-whoami", {}, principal="carol")
        stored = json.dumps(list(rt.audit.records()), default=str)
        stored += Path(rt._registry.descriptor_path(rt.tool("notes-whoami").digest)).read_text()
    assert seen == {
        "alice": {"user": "alice", "token": "[REDACTED]"},
        "bob": {"user": "bob", "token": "[REDACTED]"},
    }
    assert nobody.code == "upstream_error" and nobody.error is not None
    assert "connection://notes/{principal}" in nobody.error.message, "carol has no connection: nothing is sent"
    assert not any(token in stored for token in tokens)


def test_an_import_lists_and_reads_with_the_runtimes_home_when_glovebox_home_is_elsewhere(
    served: Served, notes: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for user, account in (("admin", "default"), ("alice", "alice")):
        answer = served.authorize_as(user, served.begin(account=account, name="notes", resource=notes))
        assert answer.status_code == 200, answer.text
    monkeypatch.setenv("GLOVEBOX_HOME", str(tmp_path / "elsewhere"))  # no connection there
    with glovebox.Runtime(home=served.home) as rt:
        secret = ["Authorization=connection://notes/{principal}"]
        imported = import_mcp(rt, notes, name="notes", scopes=[], header_secrets=secret)
        assert "notes-read-resource" in {tool.name for tool in imported.tools}, "listed with the home's default"
        read = rt.call("notes-read-resource", {"uri": "notes://me"}, principal="alice")
        assert read.ok, read.to_dict()
        assert read.output["contents"][0]["text"] == "notes of alice", "alice's own account, from the Runtime's home"
        prompt = rt.call("notes-get-prompt", {"name": "greet"}, principal="alice")
        assert prompt.ok, prompt.to_dict()
        assert "hello alice" in json.dumps(prompt.output)
        nobody = rt.call("notes-read-resource", {"uri": "notes://me"}, principal="carol")
        assert nobody.code == "upstream_error", "carol has no account: nothing is sent"
        out = connect_by_name(served, "carol", "carol")  # no --resource: the import's server URL
        assert out == f"connected notes/carol with {served.url}: connection://notes/carol\n"
        assert served.store().get("notes", "carol").resource == notes
        read = rt.call("notes-read-resource", {"uri": "notes://me"}, principal="carol")
        assert read.ok and read.output["contents"][0]["text"] == "notes of carol", read.to_dict()
