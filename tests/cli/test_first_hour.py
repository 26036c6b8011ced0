"""The first hour of a tool author and an operator, through the real CLI.

Each test is a wall a new user hit: a home that is a file, an approval message
whose command did not work, a manifest that did not do what the README says, an
error in another voice. Commands run through click's ``CliRunner`` (tracebacks
fail the test) or, where a terminal or a real build matters, a subprocess.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import glovebox
from glovebox.cli._main import cli

ROOT = Path(__file__).resolve().parents[2]


def invoke(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input, prog_name="glovebox", catch_exceptions=False, env=env)


# -- homes that cannot surprise ------------------------------------------------------


def test_home_that_is_a_file_is_one_clear_error(tmp_path: Path) -> None:
    somefile = tmp_path / "somefile"
    somefile.write_text("")
    result = invoke("tools", env={"GLOVEBOX_HOME": str(somefile)})
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == f"error [io_error]: the glovebox home {somefile} is a file, not a directory\n"


def test_home_under_a_file_is_one_clear_error(tmp_path: Path) -> None:
    somefile = tmp_path / "somefile"
    somefile.write_text("")
    for command in (["tools"], ["keys", "list"], ["audit", "tail"]):
        result = invoke("--home", str(somefile / "sub"), *command)
        assert result.exit_code == 1, command
        assert result.stderr == (
            f"error [io_error]: the glovebox home {somefile / 'sub'} cannot be made: {somefile} is a file\n"
        ), command


def test_library_refuses_a_home_that_is_a_file(tmp_path: Path) -> None:
    somefile = tmp_path / "somefile"
    somefile.write_text("")
    with pytest.raises(NotADirectoryError, match=f"the glovebox home {somefile} is a file"):
        glovebox.Runtime(home=somefile)
    with pytest.raises(NotADirectoryError, match=f"cannot be made: {somefile} is a file"):
        glovebox.Runtime(home=somefile / "deeper" / "sub")


def test_a_bad_policy_creates_nothing_in_a_new_home(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 9\n")
    home = tmp_path / "new-home"
    result = invoke("--home", str(home), "--policy", str(bad), "tools")
    assert result.exit_code == 1
    assert result.stderr.startswith("error [invalid_policy]: invalid policy ")
    assert not home.exists()
    with pytest.raises(glovebox.InvalidPolicy):
        glovebox.Runtime(home=home, policy=bad)
    with pytest.raises(glovebox.InvalidGrants):
        glovebox.Runtime(home=home, grants={"http": {"nonsense": 1}})
    assert not home.exists()


def test_c_build_keeps_zig_cache_in_the_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cold Zig cache: this build takes tens of seconds, and writes nothing to ~/.cache/zig."""
    pytest.importorskip("ziglang")
    monkeypatch.delenv("ZIG_GLOBAL_CACHE_DIR", raising=False)
    home = tmp_path / "home"
    src = tmp_path / "tool.c"
    src.write_text((ROOT / "tests" / "guests" / "echo.c").read_text())
    result = invoke("--home", str(home), "build", str(src))
    assert result.exit_code == 0, result.stderr
    assert (home / "cache" / "zig").is_dir()
    assert any((home / "cache" / "zig").iterdir())


# -- approvals an operator can run from the message ----------------------------------

APPROVAL_POLICY = """
version: 1
principals:
  agent: {scopes: [run]}
  admin: {scopes: [run, glovebox:approve]}
rules:
  - {tool: sensitive, action: require_approval}
approvals: {ttl_s: 600}
"""
ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


@pytest.fixture
def approval_home(tmp_path: Path, build_guest: Callable[[str], Path]) -> tuple[Path, Path]:
    home, policy = tmp_path / "home", tmp_path / "policy.yaml"
    policy.write_text(APPROVAL_POLICY)
    with glovebox.Runtime(home=home) as rt:
        rt.register(build_guest("echo"), {"name": "sensitive", "description": "echo", "required_scopes": ["run"]})
    return home, policy


def ask(home: Path, policy: Path, value: str) -> dict[str, Any]:
    result = invoke(
        "--home", str(home), "--policy", str(policy), "call", "sensitive", "--input", value, "--principal", "agent"
    )
    envelope: dict[str, Any] = json.loads(result.stdout)
    return envelope


def test_the_approval_message_holds_a_command_that_works(approval_home: tuple[Path, Path]) -> None:
    home, policy = approval_home
    refused = ask(home, policy, '{"q": 1}')
    assert refused["error"]["code"] == "approval_required"
    details = refused["error"]["details"]
    approval_id = details["approval_id"]
    assert isinstance(details["expires_at"], float) and re.fullmatch(ISO, details["expires_at_iso"])
    message = refused["error"]["message"]
    assert f"until {details['expires_at_iso']}" in message
    command = re.search(r"`(glovebox [^`]*approve [^`]*)`", message)
    assert command is not None, message
    assert command.group(1) == f"glovebox --policy {policy} approve {approval_id} --principal APPROVER"
    argv = shlex.split(command.group(1).replace("APPROVER", "admin"))[1:]
    approved = invoke("--home", str(home), *argv)
    assert approved.exit_code == 0, approved.stderr
    assert re.fullmatch(
        f"approved {approval_id}: agent may call sensitive@0.0.0 once with that input until {ISO}\n", approved.stdout
    )
    ran = ask(home, policy, '{"q": 1}')
    assert ran["ok"] and ran["output"] == {"q": 1}
    [row] = [
        json.loads(line)
        for line in invoke("--home", str(home), "audit", "tail", "-n", "1", "--json").stdout.splitlines()
    ]
    assert row["decision"] == "approved"
    assert json.loads(row["egress"])["approval"] == {"id": approval_id, "by": "admin"}
    assert invoke("--home", str(home), "audit", "verify").exit_code == 0


def test_approvals_list_and_deny(approval_home: tuple[Path, Path]) -> None:
    home, policy = approval_home
    empty = invoke("--home", str(home), "approvals", "list")
    assert (empty.exit_code, empty.stdout) == (0, "no pending approval requests\n")
    approval_id = ask(home, policy, '{"q": 2}')["error"]["details"]["approval_id"]
    listed = invoke("--home", str(home), "approvals", "list")
    header, line = listed.stdout.splitlines()
    assert header.split() == ["ID", "PRINCIPAL", "TOOL", "REQUESTED", "EXPIRES", "INPUT"]
    assert re.fullmatch(rf"{approval_id}\s+agent\s+sensitive@0\.0\.0\s+{ISO}\s+{ISO}\s+sha256:[0-9a-f]{{12}}", line)
    [entry] = json.loads(invoke("--home", str(home), "approvals", "list", "--json").stdout)
    assert entry["id"] == approval_id and entry["status"] == "pending"
    assert isinstance(entry["expires_at"], float) and re.fullmatch(ISO, entry["expires_at_iso"])

    no_reason = invoke(
        "--home", str(home), "--policy", str(policy), "approvals", "deny", approval_id, "--principal", "admin"
    )
    assert no_reason.exit_code == 2 and "error [usage_error]: Missing option '--reason'." in no_reason.stderr
    base = (
        "--home",
        str(home),
        "--policy",
        str(policy),
        "approvals",
        "deny",
        approval_id,
        "--reason",
        "not on Fridays",
    )
    refused = invoke(*base, "--principal", "agent")
    assert refused.exit_code == 1
    assert (
        refused.stderr
        == "error [permission_denied]: principal 'agent' lacks the approver scope 'glovebox:approve'\n"
    )
    denied = invoke(*base, "--principal", "admin")
    assert denied.exit_code == 0, denied.stderr
    assert denied.stdout == (
        f"denied {approval_id}: agent may not call sensitive@0.0.0 with that input: not on Fridays\n"
    )
    answer = ask(home, policy, '{"q": 2}')
    assert answer["error"]["code"] == "permission_denied"
    assert answer["error"]["message"] == "'admin' denied calling sensitive@0.0.0 with this input: not on Fridays"
    assert answer["error"]["details"] == {"approval_id": approval_id, "denied_by": "admin", "reason": "not on Fridays"}
    assert invoke("--home", str(home), "approvals", "list").stdout == "no pending approval requests\n"
    [row] = [
        json.loads(line)
        for line in invoke("--home", str(home), "audit", "tail", "-n", "1", "--json").stdout.splitlines()
    ]
    assert (row["decision"], row["outcome"]) == ("denied", "permission_denied")
    assert json.loads(row["egress"])["approval"] == {"id": approval_id, "by": "admin"}
    assert invoke("--home", str(home), "audit", "verify").exit_code == 0


def test_approving_without_a_policy_says_so(approval_home: tuple[Path, Path]) -> None:
    home, policy = approval_home
    approval_id = ask(home, policy, '{"q": 3}')["error"]["details"]["approval_id"]
    for command in (["approve", approval_id], ["approvals", "deny", approval_id, "--reason", "no"]):
        result = invoke("--home", str(home), *command, "--principal", "admin")
        assert result.exit_code == 1
        assert result.stderr == (
            "error [permission_denied]: no policy is loaded, so no principal holds the approver scope: "
            "give the policy that asked for the approval (glovebox --policy FILE, or GLOVEBOX_POLICY)\n"
        )


def test_library_and_process_pool_deny(approval_home: tuple[Path, Path]) -> None:
    home, policy = approval_home
    with glovebox.Runtime(home=home, policy=policy) as rt:
        first = rt.call("sensitive", {"q": 4}, principal="agent").error
        assert first is not None
        with pytest.raises(ValueError, match="a denial needs a reason"):
            rt.deny(first.details["approval_id"], principal="admin", reason=" ")
        denied = rt.deny(first.details["approval_id"], principal="admin", reason="too risky")
        assert (denied.status, denied.approved_by, denied.reason) == ("denied", "admin", "too risky")
        assert rt.call("sensitive", {"q": 4}, principal="agent").code == "permission_denied"
    with glovebox.ProcessPool(processes=1, home=home, policy=policy) as pool:
        second = pool.call("sensitive", {"q": 5}, principal="agent").error
        assert second is not None and second.code == "approval_required"
        pool.deny(second.details["approval_id"], principal="admin", reason="no")
        again = pool.call("sensitive", {"q": 5}, principal="agent")
        assert again.code == "permission_denied" and again.error is not None
        assert again.error.details["reason"] == "no"
