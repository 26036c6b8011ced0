"""The call pipeline as a chain of handlers, driven through a FakeExecutor: no guest is built.

Every test here goes through ``Runtime.call`` and the whole real chain (registry,
policy, quotas, approvals, validation, retries, breakers, checks, audit); only the
last step, which would run a sandbox, is the fake's Python function.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.core._errors import GuestError, UpstreamError
from glovebox.runtime import handlers
from glovebox.runtime.executors import FakeExecutor

ECHO = {
    "name": "echo",
    "version": "1.0.0",
    "description": "Answers its input.",
    "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "output_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}


def write_policy(path: Path, body: str) -> Path:
    path.write_text("version: 1\n" + body)
    return path


def rows(rt: glovebox.Runtime) -> list[dict[str, Any]]:
    return rt.audit.tail(100)


@pytest.fixture
def fake() -> FakeExecutor:
    return FakeExecutor({"echo": lambda value: value})


def test_the_chain_runs_in_the_documented_order(tmp_path: Path, fake: FakeExecutor) -> None:
    with glovebox.Runtime(tmp_path / "home", executor=fake) as rt:
        names = [type(handler).__name__ for handler in rt._handlers]
    assert names == [
        "Tracing",
        "Admission",
        "Compute",
        "Attempts",
        "Audit",
        "Resolve",
        "Policy",
        "Breakers",
        "ValidateInput",
        "Approvals",
        "OutputChecks",
        "SecretScan",
    ]
    assert set(names) == set(handlers.__all__) - {"Execute"}


def test_a_fake_tool_answers_through_the_whole_chain(tmp_path: Path, fake: FakeExecutor) -> None:
    with glovebox.Runtime(tmp_path / "home", executor=fake) as rt:
        fake.register(rt, ECHO)
        result = rt.call("echo", {"text": "hi"}, principal="ann")
        assert result.ok and result.output == {"text": "hi"}
        assert result.meta["tool"] == "echo" and result.meta["version"] == "1.0.0"
        assert result.meta["principal"] == "ann" and result.meta["digest"].startswith("sha256:")
        (row,) = rows(rt)
        assert row["call_id"] == result.meta["call_id"] and row["outcome"] == "ok"
    assert fake.runs == {"echo": 1}


def test_input_that_breaks_the_schema_never_reaches_the_executor(tmp_path: Path, fake: FakeExecutor) -> None:
    with glovebox.Runtime(tmp_path / "home", executor=fake) as rt:
        fake.register(rt, ECHO)
        assert rt.call("echo", {"text": 5}).code == "invalid_input"
        assert rt.call("echo", float("nan")).code == "invalid_input"  # the door's JSON rules
        assert rt.call("nope", {}).code == "tool_not_found"
        assert len(rows(rt)) == 3
    assert fake.runs == {}


def test_output_that_breaks_the_schema_is_invalid_output(tmp_path: Path) -> None:
    fake = FakeExecutor({"echo": lambda value: {"text": 1}})
    with glovebox.Runtime(tmp_path / "home", executor=fake) as rt:
        fake.register(rt, ECHO)
        assert rt.call("echo", {"text": "x"}).code == "invalid_output"


def test_a_tool_error_is_the_envelope_and_a_bug_is_opaque(tmp_path: Path) -> None:
    def boom(value: Any) -> Any:
        raise KeyError("secret detail")

    def fails(value: Any) -> Any:
        raise GuestError("no such city")

    fake = FakeExecutor({"echo": fails, "boom": boom})
    with glovebox.Runtime(tmp_path / "home", executor=fake) as rt:
        fake.register(rt, ECHO)
        fake.register(rt, {**ECHO, "name": "boom"})
        failed = rt.call("echo", {"text": "x"})
        assert failed.code == "guest_error" and failed.error is not None and "no such city" in failed.error.message
        opaque = rt.call("boom", {"text": "x"})
        assert opaque.code == "internal_error" and opaque.error is not None
        assert "secret detail" not in opaque.error.message and opaque.meta["call_id"] in opaque.error.message


def test_the_policy_refuses_before_anything_runs(tmp_path: Path, fake: FakeExecutor) -> None:
    policy = write_policy(
        tmp_path / "p.yaml",
        "principals:\n  ann: {scopes: []}\ndefaults: {action: block}\nrules:\n"
        "  - {tool: echo, principals: [ann], action: allow}\n",
    )
    with glovebox.Runtime(tmp_path / "home", policy, executor=fake) as rt:
        fake.register(rt, ECHO)
        assert rt.call("echo", {"text": "x"}, principal="bob").code == "permission_denied"
        assert rt.call("echo", {"text": "x"}, principal="ann").ok
        decisions = [row["decision"] for row in rows(rt)]
    assert sorted(decisions) == ["allow", "block"]
    assert fake.runs == {"echo": 1}


def test_an_approval_is_spent_once_and_only_on_valid_input(tmp_path: Path, fake: FakeExecutor) -> None:
    policy = write_policy(
        tmp_path / "p.yaml",
        "principals:\n  ann: {scopes: []}\n  boss: {scopes: [glovebox:approve]}\n"
        "rules:\n  - {tool: echo, action: require_approval}\n",
    )
    with glovebox.Runtime(tmp_path / "home", policy, executor=fake) as rt:
        fake.register(rt, ECHO)
        assert rt.call("echo", {"text": 1}, principal="ann").code == "invalid_input"
        assert rt.pending_approvals() == []
        asked = rt.call("echo", {"text": "x"}, principal="ann")
        assert asked.code == "approval_required" and asked.error is not None
        rt.approve(asked.error.details["approval_id"], principal="boss")
        assert rt.call("echo", {"text": "x"}, principal="ann").ok
        assert rt.call("echo", {"text": "x"}, principal="ann").code == "approval_required"
    assert fake.runs == {"echo": 1}


def test_a_flaky_read_is_retried_each_attempt_with_its_own_row(tmp_path: Path) -> None:
    failures = iter([UpstreamError("502 from upstream"), UpstreamError("502 from upstream")])

    def flaky(value: Any) -> Any:
        error = next(failures, None)
        if error is not None:
            raise error
        return value

    fake = FakeExecutor({"echo": flaky})
    policy = write_policy(
        tmp_path / "p.yaml",
        "rules:\n  - {tool: echo, action: allow}\nguards:\n"
        "  - {tool: echo, idempotent: true, retries: {attempts: 3, backoff_ms: 1, retry_on: [upstream_error]}}\n",
    )
    with glovebox.Runtime(tmp_path / "home", policy, executor=fake) as rt:
        fake.register(rt, ECHO)
        result = rt.call("echo", {"text": "x"})
        assert result.ok and result.meta["attempt"] == 3
        attempts = rows(rt)
        assert len(attempts) == 3 and len({row["call_id"] for row in attempts}) == 3
        assert [row["outcome"] for row in attempts] == ["upstream_error", "upstream_error", "ok"]


def test_an_open_breaker_fails_fast_without_running_the_tool(tmp_path: Path) -> None:
    def down(value: Any) -> Any:
        raise UpstreamError("connection refused")

    fake = FakeExecutor({"echo": down})
    policy = write_policy(
        tmp_path / "p.yaml",
        "rules:\n  - {tool: echo, action: allow}\nguards:\n"
        "  - {tool: echo, breaker: {failures: 2, window_ms: 60000, open_ms: 60000, count: [upstream_error]}}\n",
    )
    with glovebox.Runtime(tmp_path / "home", policy, executor=fake) as rt:
        fake.register(rt, ECHO)
        codes = [rt.call("echo", {"text": "x"}).code for _ in range(4)]
        assert codes == ["upstream_error", "upstream_error", "circuit_open", "circuit_open"]
        assert [state.state for state in rt.breakers()] == ["open"]
    assert fake.runs == {"echo": 2}


def test_a_fallback_stands_in_for_a_tool_that_did_not_run(tmp_path: Path) -> None:
    def down(value: Any) -> Any:
        raise UpstreamError("connection refused")

    fake = FakeExecutor({"echo": down, "echo-b": lambda value: value})
    policy = write_policy(
        tmp_path / "p.yaml",
        "rules:\n  - {tool: 'echo*', action: allow}\nguards:\n  - {tool: echo, idempotent: true, fallback: [echo-b]}\n",
    )
    with glovebox.Runtime(tmp_path / "home", policy, executor=fake) as rt:
        first = fake.register(rt, ECHO)
        fake.register(rt, {**ECHO, "name": "echo-b"})
        result = rt.call("echo", {"text": "x"})
        assert result.ok and result.meta["tool"] == "echo-b"
        assert result.meta["routed_from"]["tool"] == first.name
        assert result.meta["routed_from"]["code"] == "upstream_error"


def test_admission_refuses_beyond_its_bound_and_the_refusal_is_audited(tmp_path: Path) -> None:
    entered, release = threading.Event(), threading.Event()

    def held(value: Any) -> Any:
        entered.set()
        release.wait(10)
        return value

    fake = FakeExecutor({"echo": held})
    with glovebox.Runtime(tmp_path / "home", executor=fake, max_in_flight=1, max_queued=0) as rt:
        fake.register(rt, ECHO)
        results: list[glovebox.CallResult] = []
        worker = threading.Thread(target=lambda: results.append(rt.call("echo", {"text": "a"})))
        worker.start()
        assert entered.wait(10)
        refused = rt.call("echo", {"text": "b"})
        release.set()
        worker.join(10)
        assert refused.code == "overloaded" and refused.error is not None and refused.error.retryable
        assert results[0].ok
        assert sorted(row["outcome"] for row in rows(rt)) == ["ok", "overloaded"]


def test_acall_goes_through_the_same_chain(tmp_path: Path, fake: FakeExecutor) -> None:
    with glovebox.Runtime(tmp_path / "home", executor=fake) as rt:
        fake.register(rt, ECHO)
        result = asyncio.run(rt.acall("echo", {"text": "hi"}))
        assert result.ok and result.output == {"text": "hi"}
        assert asyncio.run(rt.acall("echo", {"text": 3})).code == "invalid_input"
        assert rt.in_flight == 0
    assert fake.runs == {"echo": 1}
