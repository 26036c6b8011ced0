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


# -- evaluator tools: a registered tool judges {tool, input, output} ----------------------------------------

#: The looping judge must end by its deadline, not its fuel: 10^10 fuel (the host's maximum) lasts ~0.7 s of a
#: QuickJS loop on a fast core, well past 200 ms (5 * 10^9 and 300 ms raced on a quiet machine).
JUDGE_LIMITS = {"memory_bytes": 32 * 1024 * 1024, "fuel": 10_000_000_000, "timeout_ms": 200}


def judged(
    imported: tuple[Path, dict[str, Any]], tmp_path: Path, build_js: Any, build_guest: BuildGuest, *evaluators: str
) -> glovebox.Runtime:
    """The flaky API's read judged by ``evaluators`` (``judge``: JavaScript; ``trap``: a C guest that traps)."""
    home, fragment = imported
    rules = [{"tool": "flaky-*", "action": "allow"}, {"tool": "judge", "action": "allow"}]
    rules.append({"tool": "trap", "action": "allow"})
    guards = [{"tool": "flaky-*", "checks": {"evaluators": list(evaluators)}}]
    rt = glovebox.Runtime(home=home, policy=write_policy(tmp_path / "p.yaml", fragment, guards, rules))
    judge = build_js(Path(__file__).parents[1] / "guests" / "js_judge.js")
    rt.register(judge, manifest={"name": "judge", "limits": JUDGE_LIMITS})
    rt.register(build_guest("trap_unreachable"), manifest={"name": "trap"})
    return rt


def test_an_evaluator_tool_passes_or_refuses_the_output_in_its_own_sandbox_and_row(
    imported: tuple[Path, dict[str, Any]], flaky: FlakyServer, tmp_path: Path, build_js: Any, build_guest: BuildGuest
) -> None:
    with judged(imported, tmp_path, build_js, build_guest, "judge") as rt:
        passed = rt.call("flaky-get-item", {"id": "7"})
        refused = rt.call("flaky-get-item", {"id": "the-secret-plan"})
        rows = {r["call_id"]: r for r in rt.audit.records()}
        assert rt.audit.verify().ok
    assert passed.ok and passed.output == {"ok": "/items/7"}
    judge_call = passed.meta["evaluation"]["evaluators"][0]["call_id"]
    assert passed.meta["evaluation"] == {
        "verdict": "pass",
        "evaluators": [{"tool": "judge", "call_id": judge_call, "verdict": "pass"}],
    }
    assert rows[judge_call]["tool"] == "judge@0.0.0" and rows[judge_call]["outcome"] == "ok"
    assert refused.error is not None and refused.error.code == "evaluation_failed" and refused.output is None
    assert refused.error.details == {
        "check": "evaluators[0]",
        "reason": "the evaluator 'judge' refused the output: flaky-get-item mentions a secret",
    }
    row = rows[refused.meta["call_id"]]
    verdict = json.loads(row["egress"])["evaluation"]
    assert row["outcome"] == "evaluation_failed" and row["output"] is None
    assert verdict["verdict"] == "fail" and verdict["evaluators"][0]["verdict"] == "fail"
    assert rows[verdict["evaluators"][0]["call_id"]]["outcome"] == "ok"  # the judge answered; its answer was "no"
    assert flaky.hits == ["GET /items/7", "GET /items/the-secret-plan"]  # the judge reached nothing


@pytest.mark.parametrize(
    ("evaluator", "input_id", "code", "reason"),
    [
        ("judge", "judge-loops", "timeout", "the evaluator 'judge' failed (timeout), so the output is refused"),
        (
            "judge",
            "judge-throws",
            "guest_error",
            "the evaluator 'judge' failed (guest_error), so the output is refused",
        ),
        ("trap", "1", "guest_trap", "the evaluator 'trap' failed (guest_trap), so the output is refused"),
        (
            "judge",
            "judge-mumbles",
            "ok",
            """the evaluator 'judge' did not answer {"pass": true|false, "reason": "..."}""",
        ),
        ("nobody", "1", "tool_not_found", "the evaluator 'nobody' failed (tool_not_found), so the output is refused"),
    ],
)
def test_an_evaluator_that_traps_times_out_or_answers_nonsense_fails_closed(
    imported: tuple[Path, dict[str, Any]],
    flaky: FlakyServer,
    tmp_path: Path,
    build_js: Any,
    build_guest: BuildGuest,
    evaluator: str,
    input_id: str,
    code: str,
    reason: str,
) -> None:
    with judged(imported, tmp_path, build_js, build_guest, evaluator) as rt:
        result = rt.call("flaky-get-item", {"id": input_id})
        rows = {r["call_id"]: r for r in rt.audit.records()}
        after = rt.call("flaky-get-item", {"id": "2"})  # the host serves the next call
    assert result.error is not None and result.error.code == "evaluation_failed" and result.output is None
    assert result.error.details == {"check": "evaluators[0]", "reason": reason}
    judge_row = rows[json.loads(rows[result.meta["call_id"]]["egress"])["evaluation"]["evaluators"][0]["call_id"]]
    assert judge_row["outcome"] == code
    assert after.ok is (evaluator == "judge")


def test_an_evaluators_reason_that_quotes_the_refused_output_is_withheld(
    imported: tuple[Path, dict[str, Any]], flaky: FlakyServer, tmp_path: Path, build_js: Any, build_guest: BuildGuest
) -> None:
    with judged(imported, tmp_path, build_js, build_guest, "judge") as rt:
        refused = rt.call("flaky-get-item", {"id": "judge-quotes-4111-1111-ü"})
        rows = {r["call_id"]: r for r in rt.audit.records()}
    assert refused.error is not None and refused.error.code == "evaluation_failed" and refused.output is None
    shown = json.dumps(refused.to_dict()["error"], ensure_ascii=False)
    assert "4111" not in shown  # the refused output, quoted by the judge, never reaches the caller's error
    assert refused.error.details["reason"] == (
        "the evaluator 'judge' refused the output:"
        " (withheld: the reason quotes the refused output; the judge's audit row keeps it)"
    )
    judge_row = rows[json.loads(rows[refused.meta["call_id"]]["egress"])["evaluation"]["evaluators"][0]["call_id"]]
    assert judge_row["outcome"] == "ok"


def test_an_evaluator_judged_by_an_evaluator_is_refused_not_recursed(
    _isolated_env: Path, build_js: Any, tmp_path: Path
) -> None:
    """A guard that makes ``judge`` judge every tool, itself included, cannot loop: the chain fails closed."""
    document = {"version": 1, "defaults": {"action": "allow"}, "guards": [{"checks": {"evaluators": ["judge"]}}]}
    policy = tmp_path / "p.json"
    policy.write_text(json.dumps(document))
    with glovebox.Runtime(policy=policy) as rt:
        rt.register(
            build_js(Path(__file__).parents[1] / "guests" / "js_judge.js"), {"name": "judge", "limits": JUDGE_LIMITS}
        )
        result = rt.call("judge", {"input": {}, "output": 1})
        rows = list(rt.audit.records())
    assert result.error is not None and result.error.code == "evaluation_failed"
    assert result.error.details["reason"].startswith("the evaluator 'judge' failed (evaluation_failed)")
    inner = next(r for r in rows if r["call_id"] != result.meta["call_id"])
    assert len(rows) == 2 and inner["outcome"] == "evaluation_failed"
    assert json.loads(inner["egress"])["evaluation"] == {"verdict": "fail", "check": "evaluators[0]"}


# -- checks declared in the manifest: the policy may add, the manifest cannot lift ---------------------------


def test_checks_in_the_manifest_apply_without_a_policy_guard(_isolated_env: Path, build_guest: BuildGuest) -> None:
    with glovebox.Runtime() as rt:
        rt.register(
            build_guest("echo"), {"name": "echo", "checks": {"forbidden_patterns": ["(?:internal|private)-\\d+"]}}
        )
        clean = rt.call("echo", {"text": "public"})
        refused = rt.call("echo", {"text": "see internal-42"})
        explained = rt.explain("echo")
    assert clean.ok and clean.meta["evaluation"] == {"verdict": "pass"}
    assert refused.error is not None and refused.error.code == "evaluation_failed"
    assert refused.error.details["check"] == "manifest.forbidden_patterns[0]"
    assert any("the manifest of echo checks" in line for line in explained.guards.reason)


@pytest.mark.parametrize(
    ("policy_bytes", "manifest_bytes", "check"),
    [(24, 10_000, "max_output_bytes"), (10_000, 24, "manifest.max_output_bytes")],
)
def test_the_tighter_size_bound_of_manifest_and_policy_holds(
    _isolated_env: Path, build_guest: BuildGuest, tmp_path: Path, policy_bytes: int, manifest_bytes: int, check: str
) -> None:
    document = {
        "version": 1,
        "defaults": {"action": "allow"},
        "guards": [{"tool": "echo", "checks": {"max_output_bytes": policy_bytes}}],
    }
    policy = tmp_path / "p.json"
    policy.write_text(json.dumps(document))
    with glovebox.Runtime(policy=policy) as rt:
        rt.register(build_guest("echo"), {"name": "echo", "checks": {"max_output_bytes": manifest_bytes}})
        short = rt.call("echo", {"t": "x"})
        long = rt.call("echo", {"text": "y" * 40})
    assert short.ok
    assert long.error is not None and long.error.code == "evaluation_failed" and long.error.details["check"] == check


def test_a_manifest_cannot_turn_off_the_policys_secret_check(
    _isolated_env: Path, build_guest: BuildGuest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
        rt.register(build_guest("echo"), {"name": "echo", "checks": {"secrets": False}})
        leaked = rt.call("echo", {"text": base64.b64encode(value.encode()).decode()})
    assert leaked.error is not None and leaked.error.code == "evaluation_failed"
    assert leaked.error.details["check"] == "secrets"


@pytest.mark.parametrize(
    ("checks", "fragment"),
    [
        ({"evaluators": ["Judge!"]}, "evaluators[0]: 'Judge!' is not a tool name"),
        ({"evaluators": ["judge", "judge"]}, "a tool is named twice"),
        ({"max_output_bytes": 0}, "checks.max_output_bytes"),
        ({"forbidden_patterns": ["(?i)x"]}, "forbidden_patterns[0]"),
    ],
)
def test_bad_checks_in_a_manifest_are_refused_naming_the_field(
    _isolated_env: Path, build_guest: BuildGuest, checks: dict[str, Any], fragment: str
) -> None:
    with glovebox.Runtime() as rt, pytest.raises(glovebox.InvalidManifest) as refused:
        rt.register(build_guest("echo"), {"name": "echo", "checks": checks})
    assert fragment in refused.value.message
