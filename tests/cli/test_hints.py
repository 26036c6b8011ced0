"""Every command glovebox prints for a person to run works as printed.

The hints with a real id in them (an approval's approve and deny commands, a SQL
statement's approval, the next page of ``approvals list``) are run through the CLI
after only their placeholders (``APPROVER``, ``TEXT``, ``POLICY``) are filled in.
Every other ```glovebox ...``` written in the package's source parses with the real
click group, placeholders filled with values of their shape.
"""

from __future__ import annotations

import json
import re
import shlex
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import glovebox
from glovebox.cli._main import cli

from .test_docs_commands import parse_only

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "runtime" / "glovebox"

POLICY = """\
version: 1
principals:
  agent: {scopes: [run, db:read, db:write]}
  admin: {scopes: [run, glovebox:approve]}
rules:
  - {tool: sensitive, action: require_approval}
  - {tool: db-*, action: allow}
grants:
  - tool: db-*
    sql:
      - {database: db, dsn: "sqlite:///DB"}
"""


def invoke(*args: str, home: Path) -> Result:
    return CliRunner().invoke(
        cli, list(args), prog_name="glovebox", catch_exceptions=False, env={"GLOVEBOX_HOME": str(home)}
    )


def run_hint(command: str, home: Path, **fill: str) -> Result:
    """Run ``command`` as printed, with only its placeholders replaced (``APPROVER=admin``)."""
    argv = [fill.get(word, word) for word in shlex.split(command)]
    assert argv[0] == "glovebox" and not any(word.isupper() and len(word) > 2 for word in argv), argv
    return invoke(*argv[1:], home=home)


@pytest.fixture
def hint_home(tmp_path: Path, build_guest: Callable[[str], Path]) -> tuple[Path, Path]:
    home, policy, db = tmp_path / "home", tmp_path / "policy.yaml", tmp_path / "db.sqlite"
    with sqlite3.connect(db) as connection:
        connection.execute("CREATE TABLE notes (text TEXT)")
    policy.write_text(POLICY.replace("DB", str(db)))
    with glovebox.Runtime(home=home) as rt:
        rt.register(build_guest("echo"), {"name": "sensitive", "description": "echo", "required_scopes": ["run"]})
    imported = invoke("import", "sql", f"sqlite:///{db}", "--name", "db", home=home)
    assert imported.exit_code == 0, imported.output
    return home, policy


def call(home: Path, policy: Path, tool: str, value: dict[str, Any]) -> dict[str, Any]:
    result = invoke(
        "--policy", str(policy), "call", tool, "--input", json.dumps(value), "--principal", "agent", home=home
    )
    envelope: dict[str, Any] = json.loads(result.stdout)
    return envelope


def hints(message: str) -> list[str]:
    return re.findall(r"`(glovebox [^`]*)`", message)


def test_the_approval_messages_approve_and_deny_commands_run_as_printed(hint_home: tuple[Path, Path]) -> None:
    home, policy = hint_home
    first = call(home, policy, "sensitive", {"q": 1})["error"]
    approve, deny = hints(first["message"])
    approval_id = first["details"]["approval_id"]
    assert approve == f"glovebox --policy {policy} approve {approval_id} --principal APPROVER"
    assert deny == f"glovebox --policy {policy} approvals deny {approval_id} --reason TEXT --principal APPROVER"
    approved = run_hint(approve, home, APPROVER="admin")
    assert approved.exit_code == 0, approved.output
    assert call(home, policy, "sensitive", {"q": 1})["ok"]

    second = call(home, policy, "sensitive", {"q": 2})["error"]
    denied = run_hint(hints(second["message"])[1], home, APPROVER="admin", TEXT="not today")
    assert denied.exit_code == 0, denied.output
    answer = call(home, policy, "sensitive", {"q": 2})["error"]
    assert (answer["code"], answer["details"]["reason"]) == ("permission_denied", "not today")


def test_a_statements_approval_command_runs_as_printed(hint_home: tuple[Path, Path]) -> None:
    home, policy = hint_home
    insert = {"sql": "INSERT INTO notes VALUES (?)", "params": ["hi"]}
    held = call(home, policy, "db-execute", insert)["error"]
    assert held["code"] == "approval_required"
    [approve] = hints(held["message"])
    approved = run_hint(approve, home, POLICY=str(policy), APPROVER="admin")
    assert approved.exit_code == 0, approved.output
    assert call(home, policy, "db-execute", insert)["ok"]


def test_the_empty_listings_hints_run_as_printed(tmp_path: Path, build_guest: Callable[[str], Path]) -> None:
    home = tmp_path / "home"
    listed = invoke("tools", home=home)
    [register] = hints(listed.output)
    wasm = build_guest("echo")
    assert run_hint(register, home, **{"TOOL.wasm": str(wasm)}).exit_code == 0
    keys = invoke("keys", "list", home=home)
    [trust] = hints(keys.output)
    made = invoke("keys", "generate", "me", "--dir", str(tmp_path), home=home)
    assert made.exit_code == 0
    assert run_hint(trust, home, **{"KEY.pub": str(tmp_path / "me.pub")}).exit_code == 0


# -- every other hint in the source parses ------------------------------------------

#: A placeholder of the source's hints and a value of its shape.
_VALUES = {
    "ID": "a1b2",
    "P": "admin",
    "SRC": "tool.c",
    "OUT.wasm": "out.wasm",
    "APPROVER": "admin",
    "TEXT": "why",
    "POLICY": "policy.yaml",
    "FILE": "policy.yaml",
    "DIR": "home",
    "URL": "https://example.com/mcp",
    "TOOL.wasm": "tool.wasm",
    "KEY.pub": "key.pub",
}


def source_hints() -> list[tuple[str, str]]:
    """(file, command) for every `glovebox ...` in single backquotes (a hint, not an rST name) in the source."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for command in re.findall(r"(?<!`)`(glovebox [a-z][^`]*)`(?!`)", path.read_text(encoding="utf-8")):
            found.append((str(path.relative_to(ROOT)), command))
    return found


def _filled(command: str) -> list[str]:
    command = re.sub(r"\{[^}]*\}", "ID", command)  # an f-string's value
    return [_VALUES.get(word, word) for word in shlex.split(command)[1:]]


SOURCE_HINTS = source_hints()


def test_the_source_holds_hints_to_check() -> None:
    assert len(SOURCE_HINTS) >= 5


@pytest.mark.parametrize(("where", "command"), SOURCE_HINTS, ids=[f"{w}:{c[:40]}" for w, c in SOURCE_HINTS])
def test_every_hint_in_the_source_parses(
    where: str, command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = _filled(command)
    for word in argv:
        if re.fullmatch(r"[\w-]+\.(wasm|pub|yaml|c)", word):
            (tmp_path / word).touch()
    parse_only(argv)


# -- nothing but the result on stderr ----------------------------------------------


def test_a_librarys_log_line_reaches_stderr_only_with_v(hint_home: tuple[Path, Path]) -> None:
    """sqlglot logs a warning for ``VACUUM INTO``; without ``-v`` the command prints the envelope alone."""
    from .test_cli import entry_point

    home, policy = hint_home
    vacuum = json.dumps({"sql": f"VACUUM INTO '{home / 'copy.db'}'"})
    argv = ["--home", str(home), "--policy", str(policy), "call", "db-query", "--input", vacuum, "--principal", "agent"]
    quiet = entry_point(*argv)
    assert quiet.returncode == 1 and json.loads(quiet.stdout)["error"]["code"] == "capability_denied"
    assert quiet.stderr == ""
    loud = entry_point("-v", *argv)
    assert "WARNING sqlglot:" in loud.stderr and "Falling back to parsing as a 'Command'" in loud.stderr


def test_registering_an_older_version_says_what_a_bare_name_runs(
    tmp_path: Path, build_guest: Callable[[str], Path]
) -> None:
    home, wasm = tmp_path / "home", build_guest("echo")
    for version in ("1.0.0", "0.0.0"):
        (tmp_path / f"m{version}.json").write_text(
            json.dumps(
                {
                    "name": "greet",
                    "version": version,
                    "description": "hi",
                    "input_schema": {"type": "object", "properties": {"q": {"type": "integer"}}},
                }
            )
        )
    first = invoke("register", str(wasm), "--manifest", str(tmp_path / "m1.0.0.json"), home=home)
    assert first.exit_code == 0 and first.stderr == ""
    older = invoke("register", str(wasm), "--manifest", str(tmp_path / "m0.0.0.json"), home=home)
    assert older.exit_code == 0 and older.stdout.startswith("registered greet@0.0.0 ")
    assert older.stderr == (
        "warning: greet@0.0.0 is older than greet@1.0.0, which a bare 'greet' still resolves to: "
        "call greet@0.0.0 by its version, or give this tool a name of its own or a higher version\n"
    )
    shown = invoke("show", "greet", home=home)
    assert json.loads(shown.stdout)["version"] == "1.0.0"
