"""``glovebox connect`` as a person runs it: a process that prints the URL (or the device code) and
waits while the console (or the user on another device) completes it; and the console's page."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from glovebox.connections import ConnectError, ConnectionRecord
from glovebox.connections._discovery import check_issuer

from .conftest import KEYS, Served

RUNTIME = str(Path(__file__).resolve().parents[2] / "runtime")


def glovebox_process(served: Served, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": RUNTIME, "GLOVEBOX_HOME": str(served.home)}
    argv = [sys.executable, "-m", "glovebox", "--policy", str(served.policy), *args]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.system
def test_glovebox_connect_waits_for_the_consoles_callback(served: Served) -> None:
    process = glovebox_process(
        served, "connect", "notes", "--resource", served.resource, "--account", "alice",
        "--console", served.console, "--no-browser", "--timeout-s", "60",
    )  # fmt: skip
    assert process.stderr is not None
    assert process.stderr.readline() == "open this URL to authorize notes (account alice):\n"
    url = process.stderr.readline().strip()
    assert url.startswith(f"{served.url}/authorize?response_type=code&client_id=")
    assert "code_challenge_method=S256" in url and "resource=" in url
    answer = served.authorize_as("alice", url)
    assert answer.status_code == 200
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert out == f"connected notes/alice with {served.url}: connection://notes/alice\n"


@pytest.mark.system
def test_glovebox_connect_device_prints_the_code_and_polls(served: Served) -> None:
    process = glovebox_process(served, "connect", "notes", "--resource", served.resource, "--device")
    assert process.stderr is not None
    line = process.stderr.readline()
    found = re.fullmatch(r"open (\S+) and enter the code (\S+)\n", line)
    assert found is not None, line
    assert found[1] == f"{served.url}/activate?user_code={found[2]}"
    served.auth.approve_device(found[2], "dora")
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert out == f"connected notes/default with {served.url}: connection://notes/default\n"


@pytest.mark.system
def test_the_console_shows_each_viewer_its_own_accounts_and_auditors_all(served: Served) -> None:
    served.connect("alice", account="alice")
    served.connect("bob", account="bob")
    keys = {name: key for name, (key, _) in KEYS.items()}

    def page(who: str) -> str:
        answer = httpx.get(f"{served.console}/ui/connections", headers={"X-API-Key": keys[who]})
        assert answer.status_code == 200
        return answer.text

    def accounts(html: str) -> list[str]:
        return re.findall(r'<code class="connection">notes</code></td>\s*<td>(\w+)</td>', html)

    assert accounts(page("alice")) == ["alice"]
    assert accounts(page("auditor")) == ["alice", "bob"]
    refused = httpx.post(f"{served.console}/ui/connections/notes/alice/revoke", headers={"X-API-Key": keys["bob"]})
    assert refused.status_code == 403 and "may revoke only its own connections" in refused.text
    assert served.store().get("notes", "alice").status() == "valid"
    done = httpx.post(f"{served.console}/ui/connections/notes/alice/revoke", headers={"X-API-Key": keys["alice"]})
    assert done.status_code == 303 and served.store().get("notes", "alice").status() == "revoked"


def test_an_issuer_over_plain_http_elsewhere_than_loopback_is_insecure() -> None:
    with pytest.raises(ConnectError) as refused:
        check_issuer("http://login.example.com", ["http://login.example.com"])
    assert (refused.value.code, refused.value.message) == (
        "insecure_url",
        "issuer 'http://login.example.com' must be https (plain http only to loopback)",
    )
    assert check_issuer("https://login.example.com/", ["https://login.example.com"]) == "https://login.example.com/"


def test_a_records_status_follows_its_expiry_and_refresh_token() -> None:
    record = ConnectionRecord("n", "a", "https://i", "https://i/token", "c", expires_at=100.0)
    assert record.status(now=50) == "valid"
    assert record.status(now=150) == "expired"
    assert (
        ConnectionRecord("n", "a", "https://i", "https://i/t", "c", expires_at=100.0, has_refresh=True).status(now=150)
        == "refreshable"
    )
    assert ConnectionRecord("n", "a", "https://i", "https://i/t", "c", revoked=True).status() == "revoked"
    assert ConnectionRecord("n", "a", "https://i", "https://i/t", "c").status() == "valid", "no expiry given"
