"""Retries: an imported API on 127.0.0.1 that fails N times then recovers, attempts counted on the server.

The tools are imported from a small OpenAPI document (a read and a write)
and run through the generic operation guest under a policy with ``guards``;
the server counts every request it gets, so a retry the host claims to make
is a request the server saw.
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

RETRY = {"attempts": 4, "backoff_ms": 1, "max_backoff_ms": 5}


def test_a_read_failing_twice_is_retried_until_it_answers(
    imported: tuple[Path, dict[str, Any]], flaky: FlakyServer, tmp_path: Path
) -> None:
    home, fragment = imported
    policy = write_policy(tmp_path / "p.yaml", fragment, [{"tool": "flaky-*", "retries": RETRY}])
    flaky.fail_left = 2
    with glovebox.Runtime(home=home, policy=policy) as rt:
        result = rt.call("flaky-get-item", {"id": "7"})
        assert result.ok, result.error
        assert result.output == {"ok": "/items/7"}
        assert flaky.hits == ["GET /items/7"] * 3
        assert result.meta["attempt"] == 3
        rows = [r for r in rt.audit.records() if r["first_call_id"] == result.meta["first_call_id"]]
        assert rt.audit.verify().ok
    assert [(r["attempt"], r["outcome"]) for r in rows] == [(1, "upstream_error"), (2, "upstream_error"), (3, "ok")]
    assert rows[0]["call_id"] == result.meta["first_call_id"] != result.meta["call_id"] == rows[2]["call_id"]
    assert len({r["call_id"] for r in rows}) == 3


def test_a_write_is_never_retried(imported: tuple[Path, dict[str, Any]], flaky: FlakyServer, tmp_path: Path) -> None:
    home, fragment = imported
    policy = write_policy(tmp_path / "p.yaml", fragment, [{"tool": "flaky-*", "retries": RETRY}])
    flaky.fail_left = 1
    with glovebox.Runtime(home=home, policy=policy) as rt:
        result = rt.call("flaky-add-item", {"body": {"name": "x"}})
        assert result.error is not None and result.error.code == "upstream_error"
        assert "attempt" not in result.meta
        decision = rt.explain("flaky-add-item")
    assert flaky.hits == ["POST /items"]
    assert decision.guards.retries is None and not decision.guards.idempotent
    assert any("not idempotent" in line for line in decision.guards.reason)


def test_a_write_declared_idempotent_is_retried(
    imported: tuple[Path, dict[str, Any]], flaky: FlakyServer, tmp_path: Path
) -> None:
    home, fragment = imported
    guards = [{"tool": "flaky-add-item", "idempotent": True}, {"tool": "flaky-*", "retries": RETRY}]
    policy = write_policy(tmp_path / "p.yaml", fragment, guards)
    flaky.fail_left = 1
    with glovebox.Runtime(home=home, policy=policy) as rt:
        result = rt.call("flaky-add-item", {"body": {"name": "x"}})
    assert result.ok, result.error
    assert flaky.hits == ["POST /items"] * 2 and result.meta["attempt"] == 2


@pytest.mark.parametrize(
    ("limits", "guards", "attempts"),
    [
        pytest.param(None, [{"tool": "flaky-get-item", "retries": RETRY}], 4, id="stops_at_attempts"),
        pytest.param(
            None, [{"tool": "flaky-*", "retries": {**RETRY, "retry_on": ["overloaded"]}}], 1, id="code_not_listed"
        ),
        pytest.param(  # a backoff longer than the time left is not waited: the call answers at once
            {"timeout_ms": 2000},
            [{"tool": "flaky-*", "retries": {"attempts": 5, "backoff_ms": 5000, "max_backoff_ms": 5000}}],
            1,
            id="inside_the_callers_deadline",
        ),
    ],
)
def test_retries_end_with_the_last_failure(
    imported: tuple[Path, dict[str, Any]],
    flaky: FlakyServer,
    tmp_path: Path,
    limits: dict[str, int] | None,
    guards: list[dict[str, Any]],
    attempts: int,
) -> None:
    """Retries stop at ``attempts``, skip a code not listed, and never outlast the caller's deadline."""
    home, fragment = imported
    if limits is not None:
        fragment = {**fragment, "limits": [{"tool": "flaky-*", "limits": limits}]}
    policy = write_policy(tmp_path / "p.yaml", fragment, guards)
    flaky.fail_left = 100
    with glovebox.Runtime(home=home, policy=policy) as rt:
        result = rt.call("flaky-get-item", {"id": "1"})
    assert result.error is not None and result.error.code == "upstream_error"
    assert result.meta["attempt"] == attempts and len(flaky.hits) == attempts


def test_a_call_needing_approval_is_not_retried(
    imported: tuple[Path, dict[str, Any]], flaky: FlakyServer, tmp_path: Path
) -> None:
    home, fragment = imported
    fragment = {**fragment, "principals": {"boss": {"scopes": ["glovebox:approve"]}}}
    rules = [{"tool": "flaky-*", "action": "require_approval"}]
    policy = write_policy(tmp_path / "p.yaml", fragment, [{"tool": "flaky-*", "retries": RETRY}], rules)
    flaky.fail_left = 1
    with glovebox.Runtime(home=home, policy=policy) as rt:
        asked = rt.call("flaky-get-item", {"id": "1"})
        assert asked.error is not None and asked.error.code == "approval_required"
        rt.approve(asked.error.details["approval_id"], principal="boss")
        result = rt.call("flaky-get-item", {"id": "1"})
    assert result.error is not None and result.error.code == "upstream_error"
    assert len(flaky.hits) == 1


def test_policy_explain_shows_the_guards(imported: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    home, fragment = imported
    policy = write_policy(tmp_path / "p.yaml", fragment, [{"tool": "flaky-*", "retries": RETRY}])
    args = ["--home", str(home), "policy", "explain", "--principal", "anonymous", "--policy", str(policy)]
    shown = CliRunner().invoke(cli, [*args, "--tool", "flaky-get-item"])
    assert shown.exit_code == 0, shown.output
    assert "guards: idempotent, retries 4 attempts on upstream_error, overloaded" in shown.output
    assert "because guards[0] retries" in shown.output
    as_json = CliRunner().invoke(cli, [*args, "--tool", "flaky-add-item", "--json"])
    guards = json.loads(as_json.output)["guards"]
    assert guards["idempotent"] is False and guards["retries"] is None
