"""An imported API connected by name: ``glovebox connect NAME`` finds the URL the import calls, and the policy
fragment of an OpenAPI import whose security scheme is OAuth 2 sends each principal's connection.

The API is ``/api/...`` of the Authlib authorization server of ``oauthserver`` (a protected resource with its
RFC 9728 metadata); the calls go through the generic HTTP-operation guest with the host adding the token.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import glovebox
from glovebox.cli._main import cli
from glovebox.importers import import_openapi

from .conftest import Served
from .test_connections_cli import glovebox_process


def notes_api(served: Served, kind: str = "oauth2") -> dict[str, Any]:
    """An OpenAPI document of one read at ``/api/notes``, secured by an OAuth 2 (or OpenID Connect) scheme."""
    if kind == "oauth2":
        flow = {"authorizationUrl": f"{served.url}/authorize", "tokenUrl": f"{served.url}/token", "scopes": {}}
        scheme: dict[str, Any] = {"type": "oauth2", "flows": {"authorizationCode": flow}}
    else:
        scheme = {"type": "openIdConnect", "openIdConnectUrl": f"{served.url}/.well-known/openid-configuration"}
    answer = {"description": "who", "content": {"application/json": {"schema": {"type": "object"}}}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "Notes", "version": "1"},
        "servers": [{"url": served.resource}],
        "components": {"securitySchemes": {"login": scheme}},
        "security": [{"login": ["read"]}],
        "paths": {"/notes": {"get": {"operationId": "whoami", "responses": {"200": answer}}}},
    }


def connect_by_name(served: Served, account: str, user: str) -> str:
    """``glovebox connect notes --account ACCOUNT --device`` (no --resource), approved as ``user``."""
    process = glovebox_process(served, "connect", "notes", "--account", account, "--device")
    assert process.stderr is not None
    found = re.fullmatch(r"open (\S+) and enter the code (\S+)\n", process.stderr.readline())
    assert found is not None
    served.auth.approve_device(found[2], user)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return out


@pytest.mark.system
def test_an_imported_oauth_api_is_connected_by_name_and_called_with_each_principals_token(
    served: Served, tmp_path: Path
) -> None:
    with glovebox.Runtime(home=served.home) as rt:
        result = import_openapi(rt, notes_api(served), name="notes")
    [hint] = result.secrets
    assert hint.source == "connection://notes/{principal}"
    [secret] = result.policy["grants"][0]["secrets"]
    assert secret == {
        "name": "notes-login",
        "source": "connection://notes/{principal}",
        "host": "127.0.0.1",
        "header": "Authorization",
        "format": "Bearer {value}",
        "schemes": ["http"],
    }
    assert any(
        "glovebox connect notes --account PRINCIPAL --scope 'read' connects each principal's account" in note
        and f"(its token URL: {served.url}/token)" in note
        for note in result.notes
    ), result.notes
    for account in ("alice", "bob"):
        out = connect_by_name(served, account, account)
        assert out == f"connected notes/{account} with {served.url}: connection://notes/{account}\n"
        assert served.store().get("notes", account).resource == served.resource, "the import's base URL"
    document = {
        **result.policy,
        "connections": {"issuers": [served.url]},
        "principals": {"alice": {"scopes": ["notes:read"]}, "bob": {"scopes": ["notes:read"]}},
    }
    policy = tmp_path / "notes-policy.yaml"
    policy.write_text(yaml.safe_dump(document), encoding="utf-8")  # the fragment as it is, with principals
    with glovebox.Runtime(home=served.home, policy=policy) as rt:
        seen = {}
        for principal in ("alice", "bob"):
            called = rt.call("notes-whoami", {}, principal=principal)
            assert called.ok, called.to_dict()
            seen[principal] = called.output["user"]
    assert seen == {"alice": "alice", "bob": "bob"}


def test_an_openid_connect_scheme_names_its_configuration_and_the_cli_prints_the_connect_hint(
    served: Served, tmp_path: Path
) -> None:
    spec = tmp_path / "notes.json"
    spec.write_text(json.dumps(notes_api(served, "openIdConnect")), encoding="utf-8")
    runner = CliRunner()
    done = runner.invoke(
        cli, ["--home", str(served.home), "import", "openapi", str(spec), "--name", "notes", "--dry-run"]
    )
    assert done.exit_code == 0, done.output
    assert (
        "secret: glovebox connect notes --account PRINCIPAL, for each principal "
        "(Authorization: Bearer <connection://notes/{principal}>)"
    ) in done.output
    assert f"(its OpenID configuration: {served.url}/.well-known/openid-configuration)" in done.output
    assert "source: connection://notes/{principal}" in done.output and "provider: env" not in done.output


def test_connect_without_a_resource_names_what_is_not_imported(tmp_path: Path) -> None:
    done = CliRunner().invoke(cli, ["--home", str(tmp_path / "home"), "connect", "crm", "--device"])
    assert done.exit_code == 2
    assert f"'crm' is not an imported API or remote MCP server of {tmp_path / 'home'}" in done.output
    assert "--resource URL" in done.output
