"""``glovebox runs replay RUN --against current``: a run re-run against today's tool versions, writes
answered from its journal, reads made live, naming the first step whose answer diverges (runs/_drift.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import glovebox
from glovebox.cli._main import cli
from glovebox.model._manifest import Manifest
from glovebox.runs._drift import is_read

from .conftest import HitCounter

PROGRAM = """export default async function (input, tools) {
  const sum = await tools.call("calc", { expression: "2 + 3" });
  await tools.call("make", { url: input.base + "/make", undo: input.base + "/undo" });
  const stats = await tools.call("stats", { text: "one two three" });
  return { sum: sum.value, stats };
}"""


def _policy(port: int) -> str:
    return f"""
version: 1
defaults:
  action: allow
grants:
  - tool: "*make"
    http:
      - {{host: 127.0.0.1, schemes: [http], ports: [{port}], methods: [GET], paths: ["/**"], allow_private: true}}
"""


@pytest.fixture
def home(
    tmp_path: Path, upstream: HitCounter, build_guest: Callable[[str], Path], build_example: Callable[[str], Path]
) -> tuple[Path, Path]:
    """calc and stats@1.0.0 (text-stats): reads; make: a write (it declares unmake its compensation)."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(_policy(upstream.port))
    home = tmp_path / "home"
    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [upstream.port], "methods": ["GET"], "paths": ["/**"]}
    rule["allow_private"] = True
    with glovebox.Runtime(home=home, policy=policy) as rt:
        rt.register(build_example("calc"))
        rt.register(build_example("text-stats"), {"name": "stats", "version": "1.0.0"})
        undone = {"tool": "unmake", "input_from": {"/url": "/input/undo"}}
        rt.register(
            build_guest("http_client"), {"name": "make", "capabilities": {"http": [rule]}, "compensate": undone}
        )
        rt.register(build_guest("http_client"), {"name": "unmake", "capabilities": {"http": [rule]}})
    return home, policy


def _cli(home: tuple[Path, Path], *args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(cli, ["--home", str(home[0]), "--policy", str(home[1]), *args])
    return result.exit_code, json.loads(result.output)


@pytest.mark.system
def test_a_tool_upgrade_that_changes_an_output_names_the_diverging_step(
    home: tuple[Path, Path], upstream: HitCounter, build_guest: Callable[[str], Path]
) -> None:
    with glovebox.Runtime(home=home[0], policy=home[1]) as rt:
        done = rt.run(PROGRAM, input={"base": upstream.url("")}, principal="agent", lang="js")
    assert done.status == "done", done.to_dict()
    assert upstream.hits == {"/make": 1}

    code, same = _cli(home, "runs", "replay", done.run_id, "--against", "current")  # nothing changed yet
    assert code == 0 and same["status"] == "same" and same["diverged"] is None, same
    assert [(step["tool"], step["how"]) for step in same["steps"]] == [
        ("calc", "live"),
        ("make", "recorded"),  # a write: answered from the journal, not made again
        ("stats", "live"),
    ]
    assert upstream.hits == {"/make": 1}

    with glovebox.Runtime(home=home[0], policy=home[1]) as rt:  # stats 2.0.0 answers otherwise
        rt.register(build_guest("echo"), {"name": "stats", "version": "2.0.0"})
    code, report = _cli(home, "runs", "replay", done.run_id)
    assert code == 1 and report["status"] == "diverged", report
    diverged = report["diverged"]
    assert diverged["step"] == 2 and diverged["reason"] == "output" and diverged["tool"] == "stats"
    assert diverged["recorded"]["version"] == "1.0.0" and diverged["current"]["version"] == "2.0.0"
    assert diverged["recorded"]["output"] != diverged["current"]["output"]
    assert upstream.hits == {"/make": 1}
    with glovebox.Runtime(home=home[0], policy=home[1]) as rt:  # the live reads were full, audited calls
        rows = [row for row in rt.audit.tail(10) if row["tool"] == "stats@2.0.0"]
    assert rows and json.loads(rows[-1]["egress"])["run"]["action"] == "replay"


def test_what_a_replay_makes_live_is_a_tool_that_cannot_change_anything() -> None:
    get = {"host": "api.example.com", "methods": ["GET", "HEAD"]}
    assert is_read(Manifest(name="pure"))
    assert is_read(Manifest(name="fetch", capabilities={"http": [get]}))
    assert not is_read(Manifest(name="post", capabilities={"http": [{"host": "api.example.com", "methods": ["POST"]}]}))
    assert not is_read(Manifest(name="any", capabilities={"http": [{"host": "api.example.com", "methods": ["*"]}]}))
    assert not is_read(Manifest(name="undone", compensate={"tool": "undo"}))
