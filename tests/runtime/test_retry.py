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
import yaml
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


def test_retries_stop_at_attempts_and_answer_the_last_failure(
    imported: tuple[Path, dict[str, Any]], flaky: FlakyServer, tmp_path: Path
) -> None:
    home, fragment = imported
    policy = write_policy(tmp_path / "p.yaml", fragment, [{"tool": "flaky-get-item", "retries": RETRY}])
    flaky.fail_left = 100
    with glovebox.Runtime(home=home, policy=policy) as rt:
        result = rt.call("flaky-get-item", {"id": "1"})
    assert result.error is not None and result.error.code == "upstream_error"
    assert result.meta["attempt"] == 4 and len(flaky.hits) == 4


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


def test_a_code_not_listed_is_not_retried(
    imported: tuple[Path, dict[str, Any]], flaky: FlakyServer, tmp_path: Path
) -> None:
    home, fragment = imported
    retries = {**RETRY, "retry_on": ["overloaded"]}
    policy = write_policy(tmp_path / "p.yaml", fragment, [{"tool": "flaky-*", "retries": retries}])
    flaky.fail_left = 1
    with glovebox.Runtime(home=home, policy=policy) as rt:
        result = rt.call("flaky-get-item", {"id": "1"})
    assert result.error is not None and result.error.code == "upstream_error"
    assert result.meta["attempt"] == 1 and len(flaky.hits) == 1


def test_retries_stay_inside_the_callers_deadline(
    imported: tuple[Path, dict[str, Any]], flaky: FlakyServer, tmp_path: Path
) -> None:
    """A backoff longer than the time left is not waited: the call answers at once with its failure."""
    home, fragment = imported
    fragment = {**fragment, "limits": [{"tool": "flaky-*", "limits": {"timeout_ms": 2000}}]}
    retries = {"attempts": 5, "backoff_ms": 5000, "max_backoff_ms": 5000}
    policy = write_policy(tmp_path / "p.yaml", fragment, [{"tool": "flaky-*", "retries": retries}])
    flaky.fail_left = 100
    with glovebox.Runtime(home=home, policy=policy) as rt:
        result = rt.call("flaky-get-item", {"id": "1"})
    assert result.error is not None and result.error.code == "upstream_error"
    assert result.meta["attempt"] == 1 and len(flaky.hits) == 1


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


@pytest.mark.parametrize(
    ("retries", "fragment"),
    [
        (
            {"attempts": 3, "retry_on": ["timeout"]},
            "guards.0.retries.retry_on.0: Input should be 'upstream_error', 'overloaded' or 'rate_limited'"
            " (got 'timeout')",
        ),
        ({"attempts": 0}, "guards.0.retries.attempts"),
        ({"attempts": 2, "backoff_ms": 50, "max_backoff_ms": 10}, "max_backoff_ms (10) is below backoff_ms (50)"),
        ({"attempts": 2, "jitter": True}, "guards.0.retries.jitter: unknown field"),
    ],
)
def test_a_bad_retries_entry_is_refused_naming_the_field(tmp_path: Path, retries: Any, fragment: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "guards": [{"tool": "x", "retries": retries}]}))
    with pytest.raises(glovebox.InvalidPolicy) as refused:
        glovebox.load_policy(path)
    assert fragment in refused.value.message and "bad.yaml" in refused.value.message


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
