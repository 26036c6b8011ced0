"""The first hour of a tool author and an operator, through the real CLI.

Each test is a wall a new user hit: a home that is a file, an approval message
whose command did not work, a manifest that did not do what the README says, an
error in another voice. Commands run through click's ``CliRunner`` (tracebacks
fail the test) or, where a terminal or a real build matters, a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
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


@pytest.mark.slow  # a cold Zig cache: its libc is built again on every run
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
        refused.stderr == "error [permission_denied]: principal 'agent' lacks the approver scope 'glovebox:approve'\n"
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
    assert json.loads(row["egress"])["approval"] == {"id": approval_id, "by": "admin", "reason": "not on Fridays"}
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
        own = rt.call("sensitive", {"q": 6}, principal="admin").error
        assert own is not None
        with pytest.raises(glovebox.PermissionDenied, match="cannot deny its own request"):
            rt.deny(own.details["approval_id"], principal="admin", reason="mine")
    with glovebox.ProcessPool(processes=1, home=home, policy=policy) as pool:
        second = pool.call("sensitive", {"q": 5}, principal="agent").error
        assert second is not None and second.code == "approval_required"
        pool.deny(second.details["approval_id"], principal="admin", reason="no")
        again = pool.call("sensitive", {"q": 5}, principal="agent")
        assert again.code == "permission_denied" and again.error is not None
        assert again.error.details["reason"] == "no"


# -- manifests as the README says ----------------------------------------------------


def test_a_manifest_without_name_takes_the_stem(tmp_path: Path, build_guest: Callable[[str], Path]) -> None:
    wasm = tmp_path / "greet.wasm"
    wasm.write_bytes(build_guest("echo").read_bytes())
    (tmp_path / "greet.glovebox.toml").write_text(
        'version = "1.0.0"\ndescription = "Echo."\n'
        '[input_schema]\ntype = "object"\nproperties.q = { type = "integer" }\n'
    )
    result = invoke("register", str(wasm))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("registered greet@1.0.0 sha256:") and result.stderr == ""


def test_a_folder_manifest_applies_only_to_its_tool(tmp_path: Path) -> None:
    """`glovebox build mix/square.c` beside slugify's glovebox.toml stays square (a real C build)."""
    pytest.importorskip("ziglang")
    mix = tmp_path / "mix"
    mix.mkdir()
    (mix / "square.c").write_text((ROOT / "tests" / "guests" / "echo.c").read_text())
    (mix / "slugify.py").write_text("def slugify(text: str) -> str:\n    return text\n")
    (mix / "glovebox.toml").write_text('name = "slugify"\nversion = "2.0.0"\ndescription = "Slugs."\n')
    built = invoke("build", str(mix / "square.c"))
    assert built.exit_code == 0, built.stderr
    assert built.stdout == f"{mix / 'square.wasm'}\n"
    not_used = (
        f"warning: {mix / 'glovebox.toml'} is not used for square.c: it names slugify and the folder holds 2 tools;"
        " give this one its own square.glovebox.toml\n"
    )
    assert built.stderr == not_used
    assert not (mix / "square.glovebox.toml").exists()
    registered = invoke("register", str(mix / "square.wasm"))
    assert registered.exit_code == 0
    assert registered.stdout.startswith("registered square@0.0.0 ")
    assert registered.stderr == (
        not_used.replace("square.c", "square.wasm")
        + "warning: square@0.0.0 has no description: agents are told nothing about what it does\n"
        + "warning: square@0.0.0 accepts any input (input_schema true): agents are told nothing about its parameters\n"
    )


def test_manifest_errors_name_file_line_field_and_value(tmp_path: Path, build_guest: Callable[[str], Path]) -> None:
    manifest = tmp_path / "bad.toml"
    manifest.write_text('name = "ok"\nversion = "one"\ndescription = "x"\n\n[limits]\nfuel = -5\ncolour = 1\n')
    result = invoke("register", str(build_guest("echo")), "--manifest", str(manifest))
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == (
        f"error [invalid_manifest]: invalid manifest {manifest}:2: version: String should match pattern "
        "'^\\d+\\.\\d+\\.\\d+(?:[-+][0-9A-Za-z.+-]+)?$' (got 'one'); "
        f"{manifest}:6: limits.fuel: Input should be greater than 0 (got -5); "
        f"{manifest}:7: limits.colour: unknown field (not part of the manifest format; see the manifest reference)\n"
    )
    as_json = tmp_path / "bad.json"
    as_json.write_text('{\n  "name": "ok",\n  "limits": {\n    "timeout_ms": "soon"\n  }\n}\n')
    result = invoke("register", str(build_guest("echo")), "--manifest", str(as_json))
    assert result.stderr == (
        f"error [invalid_manifest]: invalid manifest {as_json}:4: limits.timeout_ms: "
        "Input should be a valid integer, unable to parse string as an integer (got 'soon')\n"
    )


# -- one voice ------------------------------------------------------------------------


def _commands(command: click.Command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    found = [(path, command)]
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            found += _commands(command.commands[name], (*path, name))
    return found


def _undocumented(command: click.Command) -> list[str]:
    """What ``command``'s help leaves out: what it does, an option's meaning or its default."""
    missing = [] if (command.help or "").strip() else ["what the command does"]
    for param in command.params:
        if not isinstance(param, click.Option) or param.hidden or param.name in ("help", "version"):
            continue
        text = (param.help or "").lower()
        if not text:
            missing.append(f"{param.opts[0]}: what it is")
        elif not (param.is_flag or param.required or param.show_default or "default" in text):
            missing.append(f"{param.opts[0]}: its default")
    return missing


def test_every_help_says_what_it_does_and_its_defaults() -> None:
    gaps = {}
    for path, command in _commands(cli):
        result = invoke(*path, "--help")
        assert result.exit_code == 0 and result.stdout.startswith("Usage: glovebox"), path
        if _undocumented(command):
            gaps[" ".join(path) or "glovebox"] = _undocumented(command)
    assert gaps == {}


def test_a_missing_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "starlette", None)  # what find_spec reports for a package not installed
    result = invoke("serve", "--insecure-anonymous")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == (
        "error [missing_extra]: starlette is not installed; "
        "the servers need the 'serve' extra: pip install 'glovebox-runtime[serve]'\n"
    )


def test_a_stdio_build_error_gives_its_hint_once(tmp_path: Path) -> None:
    pytest.importorskip("ziglang")
    src = tmp_path / "noisy.c"
    src.write_text(
        '#include <stdio.h>\n#include "glovebox.h"\n'
        "int gb_tool(const char *input, size_t len, gb_buf *out) {\n"
        '    printf("hi\\n");\n    gb_buf_puts(out, "{}");\n    return GB_OK;\n}\n'
    )
    result = invoke("build", str(src))
    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error [build_failed]: {src}: the tool imports ")
    hint = "stdio and files (printf, puts, fprintf, fopen) are not available in a sandbox; use gb_log()"
    assert line.endswith(f": {hint}") and line.count("not available") == 1


def test_call_without_input_for_a_tool_that_needs_none(build_guest: Callable[[str], Path]) -> None:
    none_needed = {"type": "object", "properties": {}, "additionalProperties": False}
    needs_q = {"type": "object", "required": ["q"], "properties": {"q": {"type": "integer"}}}
    with glovebox.Runtime() as rt:
        rt.register(build_guest("echo"), {"name": "ping", "description": "Ping.", "input_schema": none_needed})
        rt.register(build_guest("echo"), {"name": "needy", "description": "Needs q.", "input_schema": needs_q})
    ping = invoke("call", "ping")
    assert ping.exit_code == 0, ping.stderr
    assert json.loads(ping.stdout)["output"] == {}
    needy = invoke("call", "needy")
    assert needy.exit_code == 2 and needy.stdout == ""
    assert needy.stderr.splitlines()[-1] == "error [usage_error]: Missing option '--input': needy requires q"
    unknown = invoke("call", "nope")
    assert unknown.exit_code == 1 and json.loads(unknown.stdout)["error"]["code"] == "tool_not_found"


def test_help_texts_say_what_happens() -> None:
    assert "tool.c makes tool.wasm" in " ".join(invoke("build", "--help").stdout.split())
    signatures = " ".join(invoke("verify", "--help").stdout.split())
    chain = " ".join(invoke("audit", "verify", "--help").stdout.split())
    assert "signature" in signatures and "glovebox audit verify" in signatures
    assert "hash chain" in chain and "glovebox verify" in chain and "signature" in chain


def test_policy_explain_without_a_policy_says_what_happens(build_guest: Callable[[str], Path]) -> None:
    with glovebox.Runtime() as rt:
        rt.register(build_guest("echo"), {"name": "open", "description": "Echo."})
        rt.register(build_guest("echo"), {"name": "scoped", "description": "Echo.", "required_scopes": ["run"]})
    builtin = (
        "no policy is loaded (glovebox --policy FILE, or GLOVEBOX_POLICY): a tool without required scopes runs,"
        " granted only the Runtime's grants (GLOVEBOX_GRANTS; none by default); a tool with required scopes is refused"
    )
    open_tool = invoke("policy", "explain", "--principal", "agent", "--tool", "open")
    assert open_tool.stdout.splitlines()[:2] == ["decision: allow", f"  because {builtin}"]
    scoped = invoke("policy", "explain", "--principal", "agent", "--tool", "scoped")
    assert scoped.stdout.splitlines()[:3] == [
        "decision: block",
        "  because principal 'agent' lacks the scopes ['run'] that scoped requires",
        f"  because {builtin}",
    ]


def test_audit_export_and_tail_filters(build_guest: Callable[[str], Path]) -> None:
    with glovebox.Runtime() as rt:
        rt.register(build_guest("echo"), {"name": "echo", "description": "Echo."})
        rt.register(build_guest("echo"), {"name": "other", "description": "Echo."})
        ids = [
            rt.call("echo", {"n": 1}, principal="ann").meta["call_id"],
            rt.call("other", {"n": 2}, principal="bob").meta["call_id"],
            rt.call("echo", {"n": 3}, principal="bob").meta["call_id"],
            rt.call("nope", {}, principal="ann").meta["call_id"],
        ]

    def exported(*args: str) -> list[str]:
        result = invoke("audit", "export", *args)
        assert result.exit_code == 0, result.stderr
        return [json.loads(line)["call_id"] for line in result.stdout.splitlines()]

    assert exported() == exported("--jsonl") == ids
    assert exported("--tool", "echo") == [ids[0], ids[2]]
    assert exported("--tool", "echo@0.0.0", "--principal", "bob") == [ids[2]]
    assert exported("--outcome", "tool_not_found") == [ids[3]]
    assert exported("--call-id", ids[1]) == [ids[1]]
    assert exported("--since", "1h") == ids
    assert exported("--since", "2999-01-01") == []
    tail = invoke("audit", "tail", "-n", "1", "--principal", "bob", "--json")
    assert [json.loads(line)["call_id"] for line in tail.stdout.splitlines()] == [ids[2]]
    bad = invoke("audit", "tail", "--since", "yesterday")
    assert bad.exit_code == 2
    assert bad.stderr.splitlines()[-1] == (
        "error [usage_error]: Invalid value for '--since': is neither ISO 8601 (2026-12-01, 2026-12-01T10:00:00Z)"
        " nor a span (30s, 15m, 2h, 7d)"
    )


# -- glovebox new and sdk-path ---------------------------------------------------------


def _run_printed(command: str) -> Result:
    """Run one command `glovebox new` printed, its `< FILE` redirect included."""
    argv = shlex.split(command)
    stdin = None
    if "<" in argv:
        at = argv.index("<")
        stdin, argv = Path(argv[at + 1]).read_text(), argv[:at]
    assert argv[0] == "glovebox"
    return invoke(*argv[1:], input=stdin)


@pytest.mark.system  # builds each scaffold
@pytest.mark.parametrize(
    ("lang", "source"),
    [("c", "tool.c"), pytest.param("python", "tool.py", marks=pytest.mark.slow), ("ts", "tool.ts")],
)
def test_new_scaffolds_a_tool_that_builds_registers_and_answers(
    lang: str, source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("componentize_py" if lang == "python" else "ziglang")
    monkeypatch.chdir(tmp_path)
    made = invoke("new", "greet-me", "--lang", lang)
    assert made.exit_code == 0, made.stderr
    lines = made.stdout.splitlines()
    assert lines[:3] == [f"wrote greet-me/{source}", "wrote greet-me/glovebox.toml", "wrote greet-me/input.json"]
    assert lines[3:5] == ["", "build, register and call it:"]
    commands = [line.strip() for line in lines[5:]]
    assert commands == [
        f"glovebox build greet-me/{source} -o greet-me/greet-me.wasm",
        "glovebox register greet-me/greet-me.wasm",
        "glovebox call greet-me --input - < greet-me/input.json",
    ]
    built, registered, called = (_run_printed(command) for command in commands)
    assert built.exit_code == 0, built.stderr
    assert all(line.startswith("glovebox: ") for line in built.stderr.splitlines()), built.stderr  # slow steps only
    assert (registered.exit_code, registered.stderr) == (0, ""), "no warnings: it has a description and a schema"
    assert registered.stdout.startswith("registered greet-me@0.1.0 sha256:")
    assert called.exit_code == 0, called.stdout
    assert json.loads(called.stdout)["output"] == {"greeting": "Hello, Ada!"}
    again = invoke("new", "greet-me")
    assert again.exit_code == 1
    assert again.stderr == "error [invalid_argument]: greet-me already exists; choose another name or remove it\n"


def test_new_refuses_what_it_cannot_make(tmp_path: Path) -> None:
    bad_name = invoke("new", "My Tool", "--dir", str(tmp_path))
    assert bad_name.exit_code == 1 and bad_name.stderr.startswith("error [invalid_argument]: 'My Tool' is not a tool")
    zig = invoke("new", "x", "--lang", "zig", "--dir", str(tmp_path))
    assert zig.exit_code == 2
    assert zig.stderr.splitlines()[-1] == (
        "error [usage_error]: Invalid value for '--lang': 'zig' is not one of 'c', 'python', 'ts', 'rust', 'go'."
    )
    assert list(tmp_path.iterdir()) == []


def test_sdk_path_says_where_the_sdk_is() -> None:
    result = invoke("sdk-path")
    assert result.exit_code == 0
    first, *parts = result.stdout.splitlines()
    sdk = Path(first)
    assert (sdk / "c" / "glovebox.h").is_file() and (sdk / "wit").is_dir()
    assert [part.split()[0] for part in parts] == [
        "c/glovebox.h", "wit/", "python/", "rust/glovebox-guest/", "go/", "examples/",
    ]  # fmt: skip
    assert all((sdk / part.split()[0]).exists() for part in parts)


# -- progress on long work -------------------------------------------------------------


def _on_a_terminal(*args: str, cwd: Path) -> tuple[int, str, str]:
    """Run the real ``glovebox`` with stderr on a pseudo-terminal; return (exit code, stdout, terminal text)."""
    import pty

    leader, follower = pty.openpty()
    argv = [sys.executable, "-m", "glovebox", *args]
    with subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=follower, text=True) as proc:
        os.close(follower)
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            seen += chunk
        stdout = proc.stdout.read() if proc.stdout else ""
        code = proc.wait(timeout=600)
    os.close(leader)
    return code, stdout, seen.decode()


@pytest.mark.system  # a real C build
def test_a_build_on_a_terminal_says_what_it_is_doing(tmp_path: Path) -> None:
    pytest.importorskip("ziglang")
    assert invoke("new", "chatty", "--dir", str(tmp_path)).exit_code == 0
    code, stdout, terminal = _on_a_terminal("build", "chatty/tool.c", cwd=tmp_path)
    assert (code, stdout) == (0, "chatty/tool.wasm\n"), terminal
    steps = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in terminal.splitlines()]
    assert steps[0].startswith("... zig cc: compiling tool.c"), terminal
    assert steps[1] == "... wasm-tools: wrapping the module into a component"
    assert re.fullmatch(r"\.\.\. built chatty/tool\.wasm in \d+\.\d s", steps[2]), terminal
    quiet = _on_a_terminal("-q", "build", "chatty/tool.c", cwd=tmp_path)
    assert quiet == (0, "chatty/tool.wasm\n", "")


def _steps(terminal: str) -> list[str]:
    return [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in terminal.splitlines() if line.strip()]


def test_gc_on_a_terminal_says_what_it_checks_and_removes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with glovebox.Runtime(home=home):
        pass
    stray = home / "blobs" / "sha256" / ("0" * 64 + ".wasm")
    stray.write_bytes(b"\0asm" + b"\0" * 4096)
    code, stdout, terminal = _on_a_terminal("--home", str(home), "gc", cwd=tmp_path)
    assert code == 0 and stdout == f"removed {stray}\n1 leftover file(s) removed\n", terminal
    assert _steps(terminal) == [
        "... gc: sweeping what interrupted registrations staged",
        "... gc: 1 stored files checked against 0 registered artifacts; 1 to remove (4.1 kB)",
    ]
    stray.write_bytes(b"\0asm")
    assert _on_a_terminal("-q", "--home", str(home), "gc", cwd=tmp_path)[2] == ""
    stray.write_bytes(b"\0asm")
    piped = subprocess.run(
        [sys.executable, "-m", "glovebox", "--home", str(home), "gc"], capture_output=True, text=True, check=True
    )
    assert piped.stderr == "" and piped.stdout.endswith("1 leftover file(s) removed\n"), "nothing on a pipe"


@pytest.mark.system  # builds the HTTP-operation guest
def test_an_import_on_a_terminal_says_what_it_is_doing(tmp_path: Path) -> None:
    pytest.importorskip("ziglang")
    spec = Path(__file__).parents[1] / "fixtures" / "petstore.yaml"
    home = str(tmp_path / "home")
    code, stdout, terminal = _on_a_terminal("--home", home, "import", "openapi", str(spec), cwd=tmp_path)
    assert code == 0 and stdout.startswith("imported petstore (openapi): "), terminal
    steps = _steps(terminal)
    assert steps[0] == f"... reading and planning {spec}", terminal
    assert re.fullmatch(r"\.\.\. \d+ operations of 'petstore' to compare with the registry", steps[1]), terminal
    assert steps[2].startswith("... building the generic HTTP-operation guest for this home, once"), terminal
    assert re.fullmatch(r"\.\.\. registering \d+ tool versions and deprecating 0, in one transaction", steps[3])
    assert re.fullmatch(r"\.\.\. done in \d+\.\d s", steps[4]), terminal
    again = _on_a_terminal("--home", home, "import", "openapi", str(spec), cwd=tmp_path)
    assert not any("building the generic" in step for step in _steps(again[2])), "built once per home"
    quiet = _on_a_terminal("-q", "--home", home, "import", "openapi", str(spec), "--dry-run", cwd=tmp_path)
    assert quiet[0] == 0 and quiet[1].startswith("would import petstore")
    assert [step for step in _steps(quiet[2]) if not step.startswith("note: ")] == [], "only the spec's notes"
    piped = subprocess.run(
        [sys.executable, "-m", "glovebox", "--home", home, "import", "openapi", str(spec), "--dry-run"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert [line for line in piped.stderr.splitlines() if not line.startswith("note: ")] == [], "no steps on a pipe"


def test_approvals_list_shows_a_page_and_says_how_to_see_the_next(tmp_path: Path) -> None:
    from glovebox.policy import ApprovalStore

    home = tmp_path / "home"
    with glovebox.Runtime(home=home):
        pass
    store = ApprovalStore(home)
    try:
        made = [store.request("agent", "sensitive@1.0.0", f"sha256:{n:064d}", ttl_s=600).id for n in range(3)]
    finally:
        store.close()
    first = invoke("--home", str(home), "approvals", "list", "--limit", "2")
    assert first.exit_code == 0 and [line.split()[0] for line in first.stdout.splitlines()[1:]] == made[:2]
    hint = f"glovebox --home {home} approvals list --limit 2 --offset 2"
    assert first.stderr == f"more are waiting: {hint}\n"
    rest = invoke(*shlex.split(hint)[1:])  # the hint runs as printed
    assert [line.split()[0] for line in rest.stdout.splitlines()[1:]] == made[2:] and rest.stderr == ""
    past = invoke("--home", str(home), "approvals", "list", "--offset", "3")
    assert past.stdout == "no pending approval requests from offset 3\n"
    with glovebox.Runtime(home=home) as rt:
        assert [a.id for a in rt.pending_approvals(offset=1, limit=1)] == made[1:2]
