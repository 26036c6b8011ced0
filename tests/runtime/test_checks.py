"""Output checks of the policy's guards: each check refusing a real output with ``evaluation_failed``.

The imported flaky API (``tests/flaky_api.py``) answers ``{"ok": "/items/<id>"}``,
so the caller's input decides what the output holds; the secret check runs
on the ``echo`` guest, whose output is its input.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

import glovebox

from ..flaky_api import FlakyServer, write_policy

BuildGuest = Any


def checked(imported: tuple[Path, dict[str, Any]], tmp_path: Path, **checks: Any) -> glovebox.Runtime:
    home, fragment = imported
    return glovebox.Runtime(
        home=home, policy=write_policy(tmp_path / "p.yaml", fragment, [{"tool": "flaky-*", "checks": checks}])
    )


def test_a_forbidden_pattern_refuses_the_output_and_the_row_keeps_the_verdict(
    imported: tuple[Path, dict[str, Any]], flaky: FlakyServer, tmp_path: Path
) -> None:
    with checked(imported, tmp_path, forbidden_patterns=[r"\d{4}-\d{4}"]) as rt:
        passed = rt.call("flaky-get-item", {"id": "12"})
        refused = rt.call("flaky-get-item", {"id": "1234-5678"})
        rows = {r["call_id"]: r for r in rt.audit.records()}
    assert passed.ok and passed.meta["evaluation"] == {"verdict": "pass"}
    assert refused.error is not None and refused.error.code == "evaluation_failed" and not refused.error.retryable
    assert refused.output is None
    assert refused.error.details == {
        "check": "forbidden_patterns[0]",
        "reason": "the output matches the forbidden pattern '\\\\d{4}-\\\\d{4}'",
    }
    row = rows[refused.meta["call_id"]]
    assert row["outcome"] == "evaluation_failed"
    assert json.loads(row["egress"])["evaluation"] == {"verdict": "fail", "check": "forbidden_patterns[0]"}
    assert flaky.hits == ["GET /items/12", "GET /items/1234-5678"]


def test_a_catastrophic_pattern_fails_closed_within_its_budget(
    imported: tuple[Path, dict[str, Any]], flaky: FlakyServer, tmp_path: Path
) -> None:
    # The lookahead keeps it off the linear engine: the budgeted one backtracks on it.
    with checked(imported, tmp_path, forbidden_patterns=["(?=a)(a|a)+$"]) as rt:
        refused = rt.call("flaky-get-item", {"id": "a" * 40})
        after = rt.call("flaky-get-item", {"id": "b"})  # the host serves the next call
    assert refused.error is not None and refused.error.code == "evaluation_failed"
    assert refused.error.details["reason"] == "the pattern took over 250 ms"
    assert after.ok


def test_a_catastrophic_pattern_the_linear_engine_runs_is_answered(
    imported: tuple[Path, dict[str, Any]], flaky: FlakyServer, tmp_path: Path
) -> None:
    with checked(imported, tmp_path, forbidden_patterns=["(a|a)+b", "(a|a)+$"]) as rt:
        passed = rt.call("flaky-get-item", {"id": "a" * 40})
        refused = rt.call("flaky-get-item", {"id": "a" * 40 + "b"})
    assert passed.ok, passed.error
    assert refused.error is not None and refused.error.code == "evaluation_failed"
    assert refused.error.details["check"] == "forbidden_patterns[0]"


def test_an_output_over_max_output_bytes_is_refused(
    imported: tuple[Path, dict[str, Any]], flaky: FlakyServer, tmp_path: Path
) -> None:
    with checked(imported, tmp_path, max_output_bytes=24) as rt:
        short = rt.call("flaky-get-item", {"id": "1"})
        long = rt.call("flaky-get-item", {"id": "x" * 20})
    assert short.ok
    assert long.error is not None and long.error.code == "evaluation_failed"
    assert long.error.details["check"] == "max_output_bytes"


def test_an_output_failing_the_extra_schema_is_refused(
    imported: tuple[Path, dict[str, Any]], flaky: FlakyServer, tmp_path: Path
) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "string", "pattern": "^/items/[0-9]+$"}}}
    with checked(imported, tmp_path, output_schema=schema) as rt:
        numeric = rt.call("flaky-get-item", {"id": "42"})
        other = rt.call("flaky-get-item", {"id": "abc"})
    assert numeric.ok
    assert other.error is not None and other.error.code == "evaluation_failed"
    assert other.error.details["check"] == "output_schema"
    assert "the policy's output schema at /ok" in other.error.details["reason"]


@pytest.mark.parametrize(
    "encode",
    [
        lambda s: s,
        lambda s: base64.b64encode(s.encode()).decode(),
        lambda s: s.encode().hex(),
        lambda s: "".join(f"\\u{ord(c):04x}" for c in s),
    ],
    ids=["raw", "base64", "hex", "json-escaped"],
)
def test_an_output_carrying_the_calls_own_secret_is_refused_in_any_encoding(
    _isolated_env: Path, build_guest: BuildGuest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encode: Any
) -> None:
    value = "s3cr3t-T0KEN-value"
    monkeypatch.setenv("GUARD_TEST_TOKEN", value)
    secret = {"name": "api", "provider": "env", "source": "GUARD_TEST_TOKEN", "host": "127.0.0.1"}
    document = {
        "version": 1,
        "defaults": {"action": "allow"},
        "grants": [{"tool": "echo", "secrets": [secret]}],
        "guards": [{"tool": "echo", "checks": {}}],
    }
    policy = tmp_path / "p.json"
    policy.write_text(json.dumps(document))
    with glovebox.Runtime(policy=policy) as rt:
        rt.register(build_guest("echo"), {"name": "echo"})
        clean = rt.call("echo", {"text": "nothing to see"})
        text = encode(value)
        leaked = rt.call("echo", json.loads(f'{{"text": "{text}"}}'))
    assert clean.ok
    assert leaked.error is not None and leaked.error.code == "evaluation_failed"
    assert leaked.error.details["check"] == "secrets"
    assert value not in json.dumps(leaked.to_dict())


def test_a_bad_forbidden_pattern_is_refused_at_load(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"version": 1, "guards": [{"tool": "x", "checks": {"forbidden_patterns": ["(?i)x"]}}]}))
    with pytest.raises(glovebox.InvalidPolicy) as refused:
        glovebox.load_policy(path)
    assert "guards.0.checks.forbidden_patterns" in refused.value.message
    assert "forbidden_patterns[0]" in refused.value.message
