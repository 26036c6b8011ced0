"""OAuth connections against a real authorization server (Authlib) on 127.0.0.1, through the console's callback.

The browser here is httpx following redirects as a user agent does (the same
requests Chromium makes: open the authorization URL, post the approval form,
follow the 302 to the console's callback); ``test_connections_browser.py``
drives the same flow in Chromium.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

import glovebox
from glovebox.capabilities._providers import SecretUnavailable, get_secret
from glovebox.cli._main import cli
from glovebox.connections import (
    ConnectError,
    ConnectSettings,
    access_token,
    begin,
    device_flow,
    prepare,
)

from .conftest import Served

pytestmark = pytest.mark.system


def api(served: Served, token: str) -> httpx.Response:
    return httpx.get(served.resource, headers={"Authorization": f"Bearer {token}"}, timeout=10)


def test_the_browser_flow_ends_at_the_console_and_stores_tokens_encrypted(served: Served) -> None:
    answer = served.authorize_as("alice", served.begin())
    assert answer.status_code == 200
    assert str(answer.url).startswith(served.redirect + "?code="), "the browser came back to the console"
    assert '<code class="connection">notes/default</code>' in answer.text and "<strong>valid</strong>" in answer.text
    record = served.store().get("notes", "default")
    assert (record.issuer, record.resource, record.scope) == (served.url, served.resource, "read")
    assert record.has_refresh and not record.client_secret, "a public client registered by RFC 7591"
    token, _ = access_token(served.store(), "notes", "default")
    assert token not in answer.text, "the console never shows a token"
    assert api(served, token).json() == {"user": "alice", "scope": "read"}
    on_disk = "".join(path.read_text() for path in (served.home / "connections").glob("*.json"))
    on_disk += (served.home / "secrets" / "store.json").read_text()
    assert (
        token not in on_disk
        and "refresh"
        not in json.loads((served.home / "connections/connections.json").read_text())["connections"]["notes/default"]
    )
    assert get_secret("connection://notes").decode() == token, "injected by reference like any secret"


def test_the_device_flow_connects_an_account_in_a_terminal(served: Served) -> None:
    settings = ConnectSettings(name="notes", resource=served.resource, account="dora")
    prepared = prepare(settings, [served.url], None)
    shown: list[tuple[str, str]] = []

    def show(uri: str, code: str, complete: str | None) -> None:
        shown.append((uri, code))
        served.auth.approve_device(code, "dora")  # the user types the code on another device

    record = device_flow(prepared, served.store(), show, sleep=lambda s: None)
    assert shown[0][0] == f"{served.url}/activate" and len(shown[0][1]) == 9
    token, _ = access_token(served.store(), "notes", "dora")
    assert record.status() == "valid" and api(served, token).json()["user"] == "dora"


def test_a_device_authorization_the_user_refuses_is_access_denied(served: Served) -> None:
    prepared = prepare(ConnectSettings(name="notes", resource=served.resource), [served.url], None)

    def refuse(uri: str, code: str, complete: str | None) -> None:
        served.auth.approve_device(code, "dora", approved=False)

    with pytest.raises(ConnectError) as refused:
        device_flow(prepared, served.store(), refuse, sleep=lambda s: None)
    assert refused.value.code == "access_denied"
    assert refused.value.message == f"the user refused the device authorization at {served.url}"


def test_a_token_due_is_refreshed_by_the_host_and_the_old_refresh_token_dies(served: Served) -> None:
    record = served.connect("alice")
    first, _ = access_token(served.store(), "notes", "default")
    old_refresh = served.store().token(record, "refresh")
    served.store().save(replace(record, expires_at=time.time() + 30), {})  # inside the 60 s skew: due
    second, refreshed = access_token(served.store(), "notes", "default")
    assert second != first and served.auth.refreshes == 1
    assert refreshed.expires_at is not None and refreshed.expires_at > time.time() + 3000
    assert api(served, second).status_code == 200
    replayed = httpx.post(
        f"{served.url}/token",
        data={"grant_type": "refresh_token", "refresh_token": old_refresh, "client_id": record.client_id},
    )
    assert replayed.json()["error"] == "invalid_grant", "the server rotates refresh tokens"


REFRESHER = """
import sys, time
from pathlib import Path
from glovebox.connections import ConnectionStore, access_token
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
token, _ = access_token(ConnectionStore(sys.argv[1]), "notes", "default")
print(token)
"""


def test_two_processes_finding_a_token_due_refresh_it_exactly_once(served: Served, tmp_path: Path) -> None:
    record = served.connect("alice")
    served.store().save(replace(record, expires_at=time.time() - 5), {})
    go = tmp_path / "go"
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "runtime"), "PATH": "/usr/bin:/bin"}
    workers = [
        subprocess.Popen([sys.executable, "-c", REFRESHER, str(served.home), str(go)], stdout=subprocess.PIPE, env=env)
        for _ in range(2)
    ]
    time.sleep(1.0)  # both started and spinning on the go file
    go.touch()
    tokens = [worker.communicate(timeout=60)[0].decode().strip() for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0]
    assert served.auth.refreshes == 1, "one refresh: the rotating refresh token was sent once"
    assert tokens[0] == tokens[1] and api(served, tokens[0]).status_code == 200
    assert served.store().get("notes", "default").status() == "valid"


def test_a_refresh_token_replayed_elsewhere_marks_the_connection_revoked(served: Served) -> None:
    record = served.connect("alice")
    refresh = served.store().token(record, "refresh")
    stolen = httpx.post(
        f"{served.url}/token",
        data={"grant_type": "refresh_token", "refresh_token": refresh, "client_id": record.client_id},
    )
    assert stolen.status_code == 200, "someone else used the refresh token first"
    served.store().save(replace(record, expires_at=time.time() - 5), {})
    with pytest.raises(ConnectError) as refused:
        access_token(served.store(), "notes", "default")
    assert refused.value.code == "revoked"
    assert refused.value.message == "the refresh token of notes/default no longer works (invalid_grant)"
    assert served.store().get("notes", "default").status() == "revoked"
    with pytest.raises(
        SecretUnavailable, match=r"^connection://notes: revoked: the connection notes/default was revoked"
    ):
        get_secret("connection://notes")


def test_connections_list_and_revoke_tell_the_server_rfc_7009(served: Served) -> None:
    served.connect("alice")
    token, _ = access_token(served.store(), "notes", "default")
    runner = CliRunner()
    listed = runner.invoke(cli, ["connections", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    [row] = json.loads(listed.output)
    assert (row["name"], row["account"], row["status"], row["reference"]) == (
        "notes", "default", "valid", "connection://notes/default",
    )  # fmt: skip
    assert token not in listed.output
    revoked = runner.invoke(cli, ["connections", "revoke", "notes"])
    assert revoked.exit_code == 0 and revoked.output == "revoked notes/default at the server and here\n"
    assert api(served, token).status_code == 401, "the server revoked the access token"
    assert all(t.revoked for t in served.auth.tokens)
    lines = runner.invoke(cli, ["connections", "list"]).output
    assert lines.startswith(f"notes/default  revoked  {served.url}")
    with pytest.raises(SecretUnavailable, match="was revoked; run glovebox connect again"):
        get_secret("connection://notes/default")
    missing = runner.invoke(cli, ["connections", "revoke", "nope"])
    assert missing.exit_code == 1
    assert "error [not_connected]: no connection 'nope' for account 'default'; run glovebox connect" in missing.output


# -- attacks --------------------------------------------------------------------------------------


def callback_error(answer: httpx.Response) -> str:
    assert answer.status_code == 400, answer.text
    start = answer.text.index('id="message">') + len('id="message">')
    return answer.text[start : answer.text.index("</p>", start)].replace("&#39;", "'")


def test_an_issuer_not_in_the_policy_is_refused_before_any_registration(served: Served) -> None:
    settings = ConnectSettings(name="notes", resource=served.resource)
    with pytest.raises(ConnectError) as refused:
        prepare(settings, ["https://login.example.com"], served.redirect)
    assert refused.value.code == "issuer_not_allowed"
    assert refused.value.message == (
        f"the authorization server {served.url} is not in the policy's connections.issuers"
        " (allowed: https://login.example.com)"
    )
    assert served.auth.clients == {}, "nothing was registered"
    runner = CliRunner()
    cli_refusal = runner.invoke(cli, ["connect", "notes", "--resource", served.resource, "--no-browser"])
    assert cli_refusal.exit_code == 1
    assert "error [issuer_not_allowed]" in cli_refusal.output and "(allowed: none)" in cli_refusal.output


def test_a_token_endpoint_redirecting_to_another_origin_is_not_followed(served: Served) -> None:
    url = served.begin()
    served.auth.hostile.token_redirect = "https://evil.example/steal"
    message = callback_error(served.authorize_as("alice", url))
    assert message == (
        f"the connection was not made: redirect_refused: the token endpoint {served.url}/token redirected to"
        " https://evil.example; OAuth endpoints are not followed"
    )
    with pytest.raises(ConnectError, match="not_connected"):
        served.store().get("notes", "default")


def test_a_token_for_another_audience_is_refused(served: Served) -> None:
    url = served.begin()
    served.auth.hostile.audience = "https://other.example/api"
    message = callback_error(served.authorize_as("alice", url))
    assert message == (
        "the connection was not made: audience_mismatch: the access token is for https://other.example/api,"
        f" not {served.resource}"
    )


def test_an_authorization_response_from_another_issuer_is_refused_rfc_9207(served: Served) -> None:
    url = served.begin()
    served.auth.hostile.issuer = "https://evil.example"
    message = callback_error(served.authorize_as("alice", url))
    assert message == (
        "the connection was not made: iss_mismatch: the authorization response came from"
        f" 'https://evil.example', not {served.url}"
    )
    assert served.auth.tokens == [], "the code was never redeemed"


def test_a_forged_or_replayed_state_is_refused(served: Served) -> None:
    forged = httpx.get(served.redirect, params={"code": "x", "state": "forged", "iss": served.url})
    expected = (
        "the connection was not made: state_mismatch: the callback's state names no pending authorization"
        " (forged, replayed or expired)"
    )
    assert callback_error(forged) == expected
    assert not (served.home / "connections" / "pending").exists(), "a forged state leaves nothing behind"
    answer = served.authorize_as("alice", served.begin())
    assert answer.status_code == 200
    assert callback_error(httpx.get(str(answer.url))) == expected, "a callback works once"


def test_a_code_injected_into_another_flow_fails_its_pkce_check(served: Served) -> None:
    victim, attacker = served.begin(account="victim"), served.begin(account="mallory")
    query = dict(httpx.URL(attacker).params)
    approved = httpx.post(attacker, data={**query, "user": "mallory"}, follow_redirects=False)
    code = dict(httpx.URL(approved.headers["location"]).params)["code"]
    state = dict(httpx.URL(victim).params)["state"]
    injected = httpx.get(served.redirect, params={"code": code, "state": state, "iss": served.url})
    assert callback_error(injected) == (
        f"the connection was not made: token_refused: the token endpoint {served.url}/token refused: invalid_grant"
    )
    assert served.auth.tokens == []


def test_protected_resource_metadata_for_another_resource_is_refused(served: Served) -> None:
    served.auth.hostile.resource = "https://other.example/api"
    settings = ConnectSettings(name="notes", resource=served.resource)
    with pytest.raises(ConnectError) as refused:
        prepare(settings, [served.url], served.redirect)
    assert refused.value.code == "resource_mismatch"
    assert refused.value.message == (
        f"the metadata at {served.url}/.well-known/oauth-protected-resource/api is for"
        f" 'https://other.example/api', not {served.resource}"
    )


# -- injection: per principal or per team, chosen by the policy -----------------------------------


def accounts_policy(served: Served) -> str:
    port = int(served.url.rsplit(":", 1)[1])
    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [port], "methods": ["GET"], "allow_private": True}

    def grant(principals: list[str], source: str) -> dict[str, object]:
        secret = {"name": "notes", "source": source, "host": "127.0.0.1", "schemes": ["http"]}
        return {"tool": "hc", "principals": principals, "http": [rule], "secrets": [secret]}

    document = {
        "version": 1,
        "connections": {"issuers": [served.url]},
        "rules": [{"tool": "hc", "action": "allow"}],
        "grants": [
            grant(["alice", "bob", "eve"], "connection://notes/{principal}"),
            grant(["carol", "dave"], "connection://notes/ops"),
        ],
    }
    return json.dumps(document)  # JSON is YAML


def test_each_principal_calls_with_its_own_account_and_a_team_shares_one(
    served: Served, build_guest: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for user, account in (("alice", "alice"), ("bob", "bob"), ("carol", "ops")):
        served.connect(user, account=account)
    served.policy.write_text(accounts_policy(served))
    port = int(served.url.rsplit(":", 1)[1])
    declared = [{"host": "127.0.0.1", "schemes": ["http"], "ports": [port], "methods": ["GET"], "allow_private": True}]
    tokens = [access_token(served.store(), "notes", account)[0] for account in ("alice", "bob", "ops")]
    monkeypatch.setenv("GLOVEBOX_HOME", str(tmp_path / "elsewhere"))  # the tokens are read from the Runtime's home
    with glovebox.Runtime(home=served.home, policy=served.policy) as rt:
        rt.register(build_guest("http_client"), manifest={"name": "hc", "capabilities": {"http": declared}})
        seen = {}
        for principal in ("alice", "bob", "carol", "dave", "eve"):
            result = rt.call("hc", {"method": "GET", "url": served.resource}, principal=principal)
            assert result.ok, result.to_dict()
            seen[principal] = (result.output["http_status"], json.loads(result.output["body"]).get("user"))
            assert not any(token in json.dumps(result.to_dict()) for token in tokens)
        rows = json.dumps(list(rt.audit.records()), default=str)
    assert seen == {
        "alice": (200, "alice"),
        "bob": (200, "bob"),
        "carol": (200, "carol"),
        "dave": (200, "carol"),  # the team's account
        "eve": (401, None),  # eve has no connection: no token is sent
    }
    assert not any(token in rows for token in tokens), "the audit never holds a token"


def test_a_guest_echoing_a_connection_token_rotated_away_has_it_redacted(
    served: Served, build_guest: Callable[[str], Path], tmp_path: Path
) -> None:
    record = served.connect("alice")
    old, _ = access_token(served.store(), "notes", "default")
    served.store().save(replace(record, expires_at=time.time() - 5), {})
    new, _ = access_token(served.store(), "notes", "default")
    assert new != old, "rotated: the old token is no call's secret any more"
    policy = tmp_path / "leak-policy.json"
    policy.write_text(json.dumps({"version": 1, "rules": [{"tool": "*", "action": "allow"}]}))
    with glovebox.Runtime(home=served.home, policy=policy) as rt:
        rt.register(build_guest("leaker"), {"name": "leaker"})
        leaked = rt.call("leaker", {"note": f"remembered {old}"})
        [row] = [row for row in rt.audit.records() if row["call_id"] == leaked.meta["call_id"]]
    assert leaked.ok and leaked.output == {"note": "remembered [REDACTED:jwt]"}
    assert old not in json.dumps(leaked.to_dict()) and old not in json.dumps(row, default=str)
    assert {"kind": "jwt", "path": "/output/note"} in leaked.meta["secret_scan"]["findings"]


def test_a_confidential_client_given_by_id_and_secret_reference_authenticates_by_basic(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    from .oauthserver import Client

    served.auth.hostile.no_registration = True
    settings = ConnectSettings(name="notes", resource=served.resource)
    with pytest.raises(ConnectError) as refused:
        prepare(settings, [served.url], served.redirect)
    assert (refused.value.code, refused.value.message) == (
        "registration_failed",
        f"{served.url} offers no dynamic client registration; give --client-id (and --client-secret-ref)",
    )
    grants = ["authorization_code", "refresh_token"]
    served.auth.clients["glovebox-ci"] = Client(
        "glovebox-ci", "ci-secret-1", [served.redirect], "client_secret_basic", grants
    )
    monkeypatch.setenv("OAUTH_CLIENT_SECRET", "ci-secret-1")
    confidential = ConnectSettings(
        name="notes", resource=served.resource, client_id="glovebox-ci", client_secret_ref="env://OAUTH_CLIENT_SECRET"
    )
    prepared = prepare(confidential, [served.url], served.redirect)
    url, _ = begin(prepared, served.redirect, served.store())
    [waiting] = (served.home / "connections" / "pending").glob("*.json")
    assert "ci-secret-1" not in waiting.read_text(), "the client secret waits sealed, never in clear"
    assert served.authorize_as("alice", url).status_code == 200
    assert [entry["name"] for entry in served.store().vault.names()] == [
        "connection.notes.default.access", "connection.notes.default.client", "connection.notes.default.refresh",
    ], "the sealed pending secret is gone"  # fmt: skip
    record = served.store().get("notes", "default")
    assert record.client_secret and record.client_id == "glovebox-ci"
    served.store().save(replace(record, expires_at=time.time() - 5), {})
    token, _ = access_token(served.store(), "notes", "default")  # refreshed with basic auth
    assert served.auth.refreshes == 1 and api(served, token).status_code == 200
    assert "ci-secret-1" not in (served.home / "connections" / "connections.json").read_text()
