"""Fallback routing: when a tool answers a retryable failure or its breaker is open, the next tool stands in.

The flaky imported API on 127.0.0.1 (``tests/flaky_api.py``) counts every
request; the fallback is the ``echo`` guest registered as ``backup``, which
answers its input, so a call it served is plain to see.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import glovebox
from glovebox.cli._main import cli

from ..flaky_api import FlakyServer, write_policy

BuildGuest = Any
RULES = [{"tool": "flaky-*", "action": "allow"}, {"tool": "backup*", "action": "allow"}]


def routed(
    imported: tuple[Path, dict[str, Any]],
    tmp_path: Path,
    build_guest: BuildGuest,
    guards: list[dict[str, Any]],
    quotas: list[dict[str, Any]] | None = None,
) -> glovebox.Runtime:
    """The flaky API's tools and ``backup`` (plus ``backup-limited``: both the echo guest) under ``guards``."""
    home, fragment = imported
    fragment = {**fragment, "quotas": quotas} if quotas else fragment
    rt = glovebox.Runtime(home=home, policy=write_policy(tmp_path / "p.yaml", fragment, guards, RULES))
    rt.register(build_guest("echo"), manifest={"name": "backup"})
    rt.register(build_guest("echo"), manifest={"name": "backup-limited"})
    return rt


def test_a_read_that_still_fails_after_its_retries_falls_back_and_says_so(
    imported: tuple[Path, dict[str, Any]], flaky: FlakyServer, tmp_path: Path, build_guest: BuildGuest
) -> None:
    retries = {"attempts": 2, "backoff_ms": 1, "max_backoff_ms": 2}
    guards = [{"tool": "flaky-get-item", "retries": retries, "fallback": ["backup"]}]
    flaky.fail_left = 100
    with routed(imported, tmp_path, build_guest, guards) as rt:
        result = rt.call("flaky-get-item", {"id": "7"})
        rows = list(rt.audit.records())
        assert rt.audit.verify().ok
    assert result.ok and result.output == {"id": "7"} and result.meta["tool"] == "backup"
    assert flaky.hits == ["GET /items/7"] * 2  # both attempts, then the fallback
    first = next(r for r in rows if r["tool"].startswith("flaky-get-item") and r["attempt"] == 2)
    assert result.meta["routed_from"] == {
        "tool": "flaky-get-item",
        "call_id": first["call_id"],
        "code": "upstream_error",
    }
    backup_row = next(r for r in rows if r["call_id"] == result.meta["call_id"])
    assert (
        backup_row["outcome"] == "ok" and json.loads(backup_row["egress"])["routed_from"] == result.meta["routed_from"]
    )
    assert [r["outcome"] for r in rows] == ["upstream_error", "upstream_error", "ok"]


def test_an_open_breaker_routes_to_the_fallback_without_reaching_the_upstream(
    imported: tuple[Path, dict[str, Any]], flaky: FlakyServer, tmp_path: Path, build_guest: BuildGuest
) -> None:
    breaker = {"failures": 1, "window_ms": 60_000, "open_ms": 60_000, "scopes": ["tool"]}
    guards = [{"tool": "flaky-add-item", "breaker": breaker, "fallback": ["backup"]}]
    flaky.fail_left = 100
    with routed(imported, tmp_path, build_guest, guards) as rt:
        failed = rt.call("flaky-add-item", {"body": {"n": 1}})  # a write that failed may have happened: no fallback
        result = rt.call("flaky-add-item", {"body": {"n": 2}})  # the breaker is open: nothing ran, so it may
    assert failed.error is not None and failed.error.code == "upstream_error" and "routed_from" not in failed.meta
    assert result.ok and result.output == {"body": {"n": 2}}
    assert result.meta["routed_from"]["code"] == "circuit_open"
    assert flaky.hits == ["POST /items"]


def test_fallbacks_are_tried_in_turn_and_only_the_first_tools_list_is_followed(
    imported: tuple[Path, dict[str, Any]], flaky: FlakyServer, tmp_path: Path, build_guest: BuildGuest
) -> None:
    """The read fails; backup-limited stands in but its quota is used up (refused before it ran), so backup
    is next. backup-limited's own fallback (back to the read) is not followed: nothing loops."""
    guards = [
        {"tool": "flaky-get-item", "fallback": ["backup-limited", "backup"]},
        {"tool": "backup-limited", "fallback": ["flaky-get-item"]},
    ]
    quotas = [{"tool": "backup-limited", "calls_per_minute": 1}]
    flaky.fail_left = 100
    with routed(imported, tmp_path, build_guest, guards, quotas) as rt:
        assert rt.call("backup-limited", {"id": "0"}).ok  # uses the quota up
        result = rt.call("flaky-get-item", {"id": "1"})
        rows = [(r["tool"].split("@")[0], r["outcome"]) for r in rt.audit.records()][1:]
    assert result.ok and result.meta["tool"] == "backup" and result.output == {"id": "1"}
    assert result.meta["routed_from"]["tool"] == "backup-limited"
    assert result.meta["routed_from"]["code"] == "rate_limited"
    assert rows == [("flaky-get-item", "upstream_error"), ("backup-limited", "rate_limited"), ("backup", "ok")]
    assert flaky.hits == ["GET /items/1"]


def test_a_failure_that_is_not_retryable_is_the_answer(
    imported: tuple[Path, dict[str, Any]], flaky: FlakyServer, tmp_path: Path, build_guest: BuildGuest
) -> None:
    guards = [{"tool": "flaky-get-item", "fallback": ["backup"]}]
    with routed(imported, tmp_path, build_guest, guards) as rt:
        refused = rt.call("flaky-get-item", {"nope": 1})  # invalid_input: the caller's to fix, not a route's
    assert refused.error is not None and refused.error.code == "invalid_input"
    assert "routed_from" not in refused.meta and flaky.hits == []


def test_policy_explain_shows_the_fallbacks(
    imported: tuple[Path, dict[str, Any]], tmp_path: Path, build_guest: BuildGuest
) -> None:
    guards = [{"tool": "flaky-*", "fallback": ["flaky-get-item", "backup"]}]
    with routed(imported, tmp_path, build_guest, guards) as rt:
        home, policy = rt.home, rt.policy_path
    args = ["--home", str(home), "policy", "explain", "--principal", "anonymous", "--policy", str(policy)]
    read = CliRunner().invoke(cli, [*args, "--tool", "flaky-get-item"])
    write = CliRunner().invoke(cli, [*args, "--tool", "flaky-add-item", "--json"])
    assert read.exit_code == 0, read.output
    assert "guards: idempotent, fallback to backup" in read.output  # itself is left out
    assert "because guards[0] falls back to backup on a retryable failure" in read.output
    shown = json.loads(write.output)["guards"]
    assert shown["fallback"] == ["flaky-get-item", "backup"]
    assert any("circuit_open, overloaded or rate_limited (not idempotent)" in line for line in shown["reason"])


@pytest.mark.parametrize(
    ("fallback", "fragment"),
    [
        (["Backup!"], "fallback[0]: 'Backup!' is not a tool name"),
        (["b", "b"], "a tool is named twice"),
        ([f"t{i}" for i in range(9)], "guards.0.fallback"),
    ],
)
def test_a_bad_fallback_is_refused_naming_the_field(tmp_path: Path, fallback: list[str], fragment: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"version": 1, "guards": [{"tool": "x", "fallback": fallback}]}))
    with pytest.raises(glovebox.InvalidPolicy) as refused:
        glovebox.load_policy(path)
    assert fragment in refused.value.message
