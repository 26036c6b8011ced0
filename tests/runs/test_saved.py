"""Saved programs as tools: ``glovebox runs save RUN --as NAME`` registers a run's program, and each call of
it runs the program as the caller, every nested call under the caller's policy (runtime/_runsave.py,
runtime/executors/_program.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import glovebox
from glovebox.cli._main import cli

from ..conftest import register_text_tools

PROGRAM = """export default async function (input, tools) {
  const stats = await tools.call("text-stats", { text: input.text });
  const doubled = await tools.call("calc", { expression: `${stats.words} * 2` });
  return { words: stats.words, doubled: doubled.value };
}"""

POLICY = """
version: 1
principals:
  author: {scopes: [text:read, glovebox:save]}
  reader: {scopes: [text:read]}
  outsider: {scopes: []}
  admin: {scopes: [glovebox:approve]}
defaults:
  action: block
rules:
  - tool: text-stats
    action: allow
  - tool: calc
    action: allow
  - tool: word-total
    action: allow
  - tool: reviewed-total
    action: allow
"""


@pytest.fixture
def home(tmp_path: Path, build_example: Callable[[str], Path]) -> tuple[Path, Path]:
    """text-stats (needs text:read) and calc; author may save, reader may read texts, outsider may not."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    home = tmp_path / "home"
    with glovebox.Runtime(home=home, policy=policy) as rt:
        register_text_tools(rt, build_example)
    return home, policy


def _cli(home: tuple[Path, Path], *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--home", str(home[0]), "--policy", str(home[1]), *args])
    return result.exit_code, result.output


def _nested_principals(home: Path, run_id: str) -> list[tuple[str, str, str]]:
    audit = glovebox.AuditLog(home)
    try:
        rows = [(row, json.loads(row["egress"] or "{}").get("run", {})) for row in audit.records()]
    finally:
        audit.close()
    return [(row["tool"], row["principal"], row["outcome"]) for row, run in rows if run.get("run_id") == run_id]


@pytest.mark.system
def test_a_saved_program_runs_under_the_callers_policy(home: tuple[Path, Path]) -> None:
    with glovebox.Runtime(home=home[0], policy=home[1]) as rt:
        done = rt.run(PROGRAM, input={"text": "one two three"}, principal="author", lang="js")
    assert done.status == "done" and done.output == {"words": 3, "doubled": 6}, done.to_dict()
    code, out = _cli(home, "runs", "save", done.run_id, "--as", "word-total")
    assert code == 0 and out.startswith("saved word-total@1.0.0 sha256:"), out

    with glovebox.Runtime(home=home[0], policy=home[1]) as rt:
        tool = rt.tool("word-total")
        assert tool.kind == "program" and tool.input_schema == {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        }  # inferred from the run's first input
        allowed = rt.call("word-total", {"text": "a b c d"}, principal="reader")
        assert allowed.ok and allowed.output == {"words": 4, "doubled": 8}, allowed.to_dict()
        assert _nested_principals(rt.home, allowed.meta["run_id"]) == [
            ("text-stats@1.0.0", "reader", "ok"),
            ("calc@1.0.0", "reader", "ok"),
            ("glovebox:run", "reader", "ok"),
        ]
        # outsider may call the saved program, but not text-stats (it lacks text:read): under its policy the
        # program's nested call finds no such tool, as a direct call of outsider's would
        denied = rt.call("word-total", {"text": "a b"}, principal="outsider")
        assert not denied.ok and denied.error is not None
        assert denied.error.code == "tool_not_found" and denied.error.details["run_id"], denied.to_dict()
        assert [
            (tool, who, outcome) for tool, who, outcome in _nested_principals(rt.home, denied.error.details["run_id"])
        ] == [
            ("text-stats", "outsider", "tool_not_found"),
            ("glovebox:run", "outsider", "tool_not_found"),
        ]
        assert not rt.call("text-stats", {"text": "a b"}, principal="outsider").ok  # as directly
        refused = rt.call("word-total", {"text": 5}, principal="reader")
        assert refused.error is not None and refused.error.code == "invalid_input"

    code, out = _cli(home, "call", "word-total", "--input", '{"text": "x y"}', "--principal", "reader")
    assert code == 0 and json.loads(out)["output"] == {"words": 2, "doubled": 4}, out


@pytest.mark.system
def test_saving_is_governed_by_the_policy(home: tuple[Path, Path], tmp_path: Path) -> None:
    with glovebox.Runtime(home=home[0], policy=home[1]) as rt:
        done = rt.run(PROGRAM, input={"text": "one"}, principal="reader", lang="js")
        assert done.status == "done", done.to_dict()
        with pytest.raises(glovebox.PermissionDenied, match="glovebox:save"):
            glovebox.save_run(rt, done.run_id, "word-total")  # reader lacks glovebox:save
        schema: dict[str, Any] = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}
        schema["additionalProperties"] = False
        info = glovebox.save_run(rt, done.run_id, "word-total", input_schema=schema, by="author")
        assert info.input_schema == schema
        refused = rt.call("word-total", {"text": "a", "more": 1}, principal="reader")
        assert refused.error is not None and refused.error.code == "invalid_input"
    schema_file = tmp_path / "schema.json"
    schema_file.write_text(json.dumps(schema))
    code, out = _cli(home, "runs", "save", done.run_id, "--as", "word-total", "--version", "2.0.0", "--by", "reader")
    assert code == 1 and "error [permission_denied]" in out, out
    code, out = _cli(
        home, "runs", "save", done.run_id, "--as", "word-total", "--version", "2.0.0",
        "--input-schema", str(schema_file), "--by", "author",
    )  # fmt: skip
    assert code == 0 and out.startswith("saved word-total@2.0.0"), out


@pytest.mark.system
def test_a_program_saved_for_review_waits_for_an_approver_before_its_first_use(home: tuple[Path, Path]) -> None:
    with glovebox.Runtime(home=home[0], policy=home[1]) as rt:
        done = rt.run(PROGRAM, input={"text": "one"}, principal="author", lang="js")
        glovebox.save_run(rt, done.run_id, "reviewed-total", review=True)
        held = rt.call("reviewed-total", {"text": "a b"}, principal="reader")
        assert held.error is not None and held.error.code == "approval_required", held.to_dict()
        approval_id = held.error.details["approval_id"]
        again = rt.call("reviewed-total", {"text": "a"}, principal="reader")  # one review, asked once
        assert again.error is not None and again.error.details["approval_id"] == approval_id
        with pytest.raises(glovebox.PermissionDenied):
            rt.approve(approval_id, principal="author")  # the saver cannot review its own program
        rt.approve(approval_id, principal="admin")
        first = rt.call("reviewed-total", {"text": "a b"}, principal="reader")
        assert first.ok and first.output == {"words": 2, "doubled": 4}, first.to_dict()
        later = rt.call("reviewed-total", {"text": "a b c"}, principal="outsider")  # reviewed: no approval again
        assert later.error is not None and later.error.code == "tool_not_found"  # (outsider's own policy still holds)
        assert rt.call("reviewed-total", {"text": "x"}, principal="reader").ok
