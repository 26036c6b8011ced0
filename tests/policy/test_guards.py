"""The policy's ``guards`` section: every bad entry is refused naming the file and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import glovebox


@pytest.mark.parametrize(
    ("field", "settings", "fragment"),
    [
        (
            "retries",
            {"attempts": 3, "retry_on": ["timeout"]},
            "guards.0.retries.retry_on.0: Input should be 'upstream_error', 'overloaded' or 'rate_limited'"
            " (got 'timeout')",
        ),
        ("retries", {"attempts": 0}, "guards.0.retries.attempts"),
        (
            "retries",
            {"attempts": 2, "backoff_ms": 50, "max_backoff_ms": 10},
            "max_backoff_ms (10) is below backoff_ms (50)",
        ),
        ("retries", {"attempts": 2, "jitter": True}, "guards.0.retries.jitter: unknown field"),
        ("breaker", {"failures": 0}, "guards.0.breaker.failures"),
        ("breaker", {"scopes": ["process"]}, "guards.0.breaker.scopes.0"),
        ("breaker", {"count": ["invalid_input"]}, "guards.0.breaker.count.0"),
        ("breaker", {"scopes": []}, "guards.0.breaker.scopes"),
    ],
)
def test_a_bad_guard_entry_is_refused_naming_the_field(
    tmp_path: Path, field: str, settings: Any, fragment: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "guards": [{"tool": "x", field: settings}]}))
    with pytest.raises(glovebox.InvalidPolicy) as refused:
        glovebox.load_policy(path)
    assert fragment in refused.value.message and "bad.yaml" in refused.value.message


def test_a_fallback_or_evaluator_that_is_not_registered_is_a_dead_entry() -> None:
    from glovebox.policy import dead_entries, parse_policy

    from .test_policy import tool

    policy = parse_policy(
        "version: 1\nguards:\n"
        "  - {tool: calc, fallback: [calc-backup, fetch@1.0.0], checks: {evaluators: [judge, fetch]}}\n"
    )
    assert dead_entries(policy, [tool("calc"), tool("fetch")]) == [
        "guards[0].fallback: 'calc-backup' is not a registered tool",
        "guards[0].checks.evaluators: 'judge' is not a registered tool",
    ]
