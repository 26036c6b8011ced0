"""Every stable call error code is produced by a real call (httpx's exception-mapping habit).

One case per code in ``glovebox.ERROR_CODES``: each drives ``Runtime.call`` with a
real guest (``tests/guests/*.c`` or ``guest/examples``), a real policy, a real
HTTP server on 127.0.0.1 or a real SQLite file, and must end with exactly that
code. A guard test fails when a code has no case, so a new code cannot be
added without showing how a call produces it.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.policy import parse_policy

from ..capabilities.test_http import QuietHandler
from ..runtime.test_admission import HoldServer, held_calls, held_runtime, hold  # noqa: F401  (fixture)

BuildGuest = Callable[[str], Path]
MIB = 1024 * 1024
EXAMPLES = Path(__file__).resolve().parents[2] / "guest" / "examples"


class _Unavailable(QuietHandler):
    """An upstream that answers every GET with 503."""

    def do_GET(self) -> None:
        self._reply(503, b'{"error": "overloaded"}')


@pytest.fixture
def unavailable() -> Iterator[int]:
    """The port of a real HTTP server on 127.0.0.1 that answers 503."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Unavailable)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(httpd.server_address[1])
    finally:
        httpd.shutdown()
        httpd.server_close()


@dataclass
class Ctx:
    home: Path
    build_guest: BuildGuest
    build_example: BuildGuest
    request: pytest.FixtureRequest

    def call(
        self,
        wasm: Path,
        manifest: dict[str, Any],
        value: Any,
        *,
        principal: str | None = None,
        **runtime: Any,
    ) -> glovebox.CallResult:
        """Register ``wasm`` as ``manifest`` in a fresh Runtime and call it once."""
        with glovebox.Runtime(home=self.home, **runtime) as rt:
            info = rt.register(wasm, manifest)
            return rt.call(info.name, value, principal=principal)

    def guest(self, name: str, value: Any = None, **manifest: Any) -> glovebox.CallResult:
        return self.call(self.build_guest(name), {"name": name.replace("_", "-"), **manifest}, value)


def weather_manifest(rule: dict[str, Any] | None = None) -> dict[str, Any]:
    manifest = tomllib.loads((EXAMPLES / "weather" / "glovebox.toml").read_text())
    if rule is not None:
        manifest["capabilities"] = {"http": [rule]}
    return manifest


# -- one case per code ---------------------------------------------------------------------------


def tool_not_found(ctx: Ctx) -> glovebox.CallResult:
    with glovebox.Runtime(home=ctx.home) as rt:
        return rt.call("no-such-tool", {})


def invalid_input(ctx: Ctx) -> glovebox.CallResult:
    schema = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}
    return ctx.guest("echo", {"n": "three"}, input_schema=schema)


def permission_denied(ctx: Ctx) -> glovebox.CallResult:
    return ctx.guest("echo", {}, required_scopes=["files:read"])


def approval_required(ctx: Ctx) -> glovebox.CallResult:
    policy = parse_policy("version: 1\nrules:\n  - {tool: echo, action: require_approval}\n")
    return ctx.call(ctx.build_guest("echo"), {"name": "echo"}, {"q": 1}, principal="agent", policy=policy)


def capability_denied(ctx: Ctx) -> glovebox.CallResult:
    return ctx.call(ctx.build_example("weather"), weather_manifest(), {"latitude": 1, "longitude": 2})


def fuel_exhausted(ctx: Ctx) -> glovebox.CallResult:
    return ctx.guest("fuel_burner", limits={"fuel": 100_000})


def memory_limit(ctx: Ctx) -> glovebox.CallResult:
    return ctx.guest("malloc_bomb_sdk", limits={"memory_bytes": 4 * MIB})


def timeout(ctx: Ctx) -> glovebox.CallResult:
    return ctx.guest("loop_forever", limits={"timeout_ms": 50, "fuel": 10_000_000_000})


def output_too_large(ctx: Ctx) -> glovebox.CallResult:
    return ctx.guest("echo", {"text": "x" * 64}, limits={"output_bytes": 32})


def guest_trap(ctx: Ctx) -> glovebox.CallResult:
    return ctx.guest("trap_unreachable")


def guest_error(ctx: Ctx) -> glovebox.CallResult:
    return ctx.guest("guest_error", {"k": 1})


def invalid_output(ctx: Ctx) -> glovebox.CallResult:
    return ctx.guest("bad_json")


def upstream_error(ctx: Ctx) -> glovebox.CallResult:
    port = ctx.request.getfixturevalue("unavailable")
    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [port], "paths": ["/**"], "allow_private": True}
    value = {"latitude": 1, "longitude": 2, "api": f"http://127.0.0.1:{port}"}
    return ctx.call(ctx.build_example("weather"), weather_manifest(rule), value, grants={"http": [rule]})


def internal_error(ctx: Ctx) -> glovebox.CallResult:
    # Another process breaks the audit journal; a call that cannot be audited fails closed.
    with glovebox.Runtime(home=ctx.home) as rt:
        rt.register(ctx.build_guest("echo"), {"name": "echo"})
        journal = ctx.home / "audit.journal"
        journal.rmdir()
        journal.write_bytes(b"")  # no journal file can be created in it
        try:
            return rt.call("echo", {"a": 1})
        finally:
            journal.unlink()
            journal.mkdir()


def rate_limited(ctx: Ctx) -> glovebox.CallResult:
    policy = parse_policy("version: 1\ndefaults: {action: allow}\nquotas:\n  - {tool: echo, calls_per_minute: 1}\n")
    with glovebox.Runtime(home=ctx.home, policy=policy) as rt:
        rt.register(ctx.build_guest("echo"), {"name": "echo"})
        assert rt.call("echo", {"a": 1}, principal="agent").ok
        return rt.call("echo", {"a": 2}, principal="agent")


def overloaded(ctx: Ctx) -> glovebox.CallResult:
    # One call waits on a held upstream; with no room to wait in line, the next is refused.
    server: HoldServer = ctx.request.getfixturevalue("hold")
    with held_runtime(ctx.home, ctx.build_guest, server, max_in_flight=1, max_queued=0) as rt:
        pool, held = held_calls(rt, server, 1)
        server.wait_for_waiting(1)
        refused = rt.call("hc", {"url": server.url()})
        server.release.set()
        assert held[0].result().ok
        pool.shutdown()
    return refused


def circuit_open(ctx: Ctx) -> glovebox.CallResult:
    # Two calls fail against an upstream that answers 503; the tool's breaker opens and the third fails fast.
    port = ctx.request.getfixturevalue("unavailable")
    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [port], "paths": ["/**"], "allow_private": True}
    document = {
        "version": 1,
        "defaults": {"action": "allow"},
        "grants": [{"tool": "weather", "http": [rule]}],
        "guards": [{"tool": "weather", "breaker": {"failures": 2, "scopes": ["tool"]}}],
    }
    value = {"latitude": 1, "longitude": 2, "api": f"http://127.0.0.1:{port}"}
    with glovebox.Runtime(home=ctx.home, policy=parse_policy(json.dumps(document))) as rt:
        rt.register(ctx.build_example("weather"), weather_manifest(rule))
        assert [rt.call("weather", value).code for _ in range(2)] == ["upstream_error"] * 2
        return rt.call("weather", value)


def evaluation_failed(ctx: Ctx) -> glovebox.CallResult:
    # The policy's output check forbids what the tool answers.
    document = {"version": 1, "defaults": {"action": "allow"}}
    document["guards"] = [{"tool": "echo", "checks": {"forbidden_patterns": ["forbidden"]}}]
    with glovebox.Runtime(home=ctx.home, policy=parse_policy(json.dumps(document))) as rt:
        rt.register(ctx.build_guest("echo"), {"name": "echo"})
        return rt.call("echo", {"text": "a forbidden word"})


CASES: dict[str, Callable[[Ctx], glovebox.CallResult]] = {
    case.__name__: case
    for case in (
        tool_not_found,
        invalid_input,
        permission_denied,
        approval_required,
        capability_denied,
        fuel_exhausted,
        memory_limit,
        timeout,
        output_too_large,
        guest_trap,
        guest_error,
        invalid_output,
        upstream_error,
        internal_error,
        rate_limited,
        overloaded,
        circuit_open,
        evaluation_failed,
    )
}


def run_limit(ctx: Ctx) -> glovebox.RunResult:
    # A program that asks the host for the time more often than its journal may hold.
    from glovebox.runs._host import RunBounds

    with glovebox.Runtime(home=ctx.home) as rt:
        rt.runs.runner.bounds = RunBounds(max_steps=20)
        return rt.run("export default async function () { for (;;) Date.now(); }")


def run_diverged(ctx: Ctx) -> glovebox.RunResult:
    # A run paused on an approval resumes with a program that asks for something else at step 0.
    document = {"version": 1, "defaults": {"action": "allow"}}
    document["rules"] = [{"tool": "held", "action": "require_approval"}]
    program = (
        "export default async function (input, tools) {"
        ' await tools.call("echo", {text: "one"}); await tools.call("held", {text: "two"}); }'
    )
    with glovebox.Runtime(home=ctx.home, policy=parse_policy(json.dumps(document))) as rt:
        rt.register(ctx.build_guest("echo"), {"name": "echo"})
        rt.register(ctx.build_guest("echo"), {"name": "held"})
        paused = rt.run(program)
        assert paused.status == "paused", paused.to_dict()
        with sqlite3.connect(rt.home / "runs.sqlite") as db:
            db.execute(
                "UPDATE runs SET script = replace(script, '\"one\"', '\"uno\"') WHERE run_id = ?", (paused.run_id,)
            )
        rt.runs.store.reseal(paused.run_id)  # sealed again, else the resume is refused: program_changed
        return rt.runs.resume(paused.run_id)


def _paused_two_step_run(ctx: Ctx, rt: glovebox.Runtime) -> glovebox.RunResult:
    rt.register(ctx.build_guest("echo"), {"name": "echo"})
    rt.register(ctx.build_guest("echo"), {"name": "held"})
    program = (
        "export default async function (input, tools) {"
        ' await tools.call("echo", {text: "one"}); await tools.call("held", {text: "two"}); }'
    )
    paused = rt.run(program)
    assert paused.status == "paused", paused.to_dict()
    return paused


def _held_policy() -> glovebox.Policy:
    document = {
        "version": 1,
        "defaults": {"action": "allow"},
        "rules": [{"tool": "held", "action": "require_approval"}],
    }
    return parse_policy(json.dumps(document))


def program_changed(ctx: Ctx) -> glovebox.RunResult:
    # A paused run whose stored program is edited in runs.sqlite: the resume refuses it.
    with glovebox.Runtime(home=ctx.home, policy=_held_policy()) as rt:
        paused = _paused_two_step_run(ctx, rt)
        with sqlite3.connect(rt.home / "runs.sqlite") as db:
            db.execute("UPDATE runs SET source = source || ' ' WHERE run_id = ?", (paused.run_id,))
        return rt.runs.resume(paused.run_id)


def journal_tampered(ctx: Ctx) -> glovebox.RunResult:
    # A paused run whose recorded step 0 is edited in runs.sqlite: the resume refuses it.
    with glovebox.Runtime(home=ctx.home, policy=_held_policy()) as rt:
        paused = _paused_two_step_run(ctx, rt)
        with sqlite3.connect(rt.home / "runs.sqlite") as db:
            db.execute("UPDATE journal SET answer = replace(answer, 'one', 'uno') WHERE run_id = ?", (paused.run_id,))
        return rt.runs.resume(paused.run_id)


def run_busy(ctx: Ctx) -> glovebox.RunResult:
    # A paused run that another process holds a live lease on (it is executing the run now).
    document = {
        "version": 1,
        "defaults": {"action": "allow"},
        "rules": [{"tool": "held", "action": "require_approval"}],
    }
    with glovebox.Runtime(home=ctx.home, policy=parse_policy(json.dumps(document))) as rt:
        rt.register(ctx.build_guest("echo"), {"name": "held"})
        paused = rt.run('export default async (input, tools) => await tools.call("held", {text: "x"})')
        assert paused.status == "paused", paused.to_dict()
        with sqlite3.connect(rt.home / "runs.sqlite") as db:
            db.execute(
                "UPDATE runs SET lease_owner = 'elsewhere/pid 1/x', lease_expires = ? WHERE run_id = ?",
                (time.time() + 600, paused.run_id),
            )
        return rt.runs.resume(paused.run_id)


#: The codes a run (code mode) ends with, not a single call: their envelope is the run's.
RUN_CASES: dict[str, Callable[[Ctx], glovebox.RunResult]] = {
    case.__name__: case for case in (run_limit, run_diverged, run_busy, program_changed, journal_tampered)
}
#: The status a run case answers with (``failed`` unless named here).
RUN_STATUS = {"run_busy": "running"}

#: The retryable codes; every other call error is not.
RETRYABLE = {"upstream_error", "rate_limited", "overloaded", "circuit_open", "run_busy"}


def _call_error_classes(cls: type[glovebox.CallError] = glovebox.CallError) -> set[type[glovebox.CallError]]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub} | _call_error_classes(sub)
    return found


def test_every_code_has_a_case() -> None:
    assert set(CASES) | set(RUN_CASES) == set(glovebox.ERROR_CODES) and not set(CASES) & set(RUN_CASES)


def test_every_call_error_class_has_a_listed_code() -> None:
    assert {cls.code for cls in _call_error_classes()} == set(glovebox.ERROR_CODES)


@pytest.mark.parametrize("code", [code for code in glovebox.ERROR_CODES if code not in RUN_CASES])
def test_a_real_call_produces(
    code: str,
    _isolated_env: Path,
    build_guest: BuildGuest,
    build_example: BuildGuest,
    request: pytest.FixtureRequest,
) -> None:
    result = CASES[code](Ctx(_isolated_env, build_guest, build_example, request))
    assert not result.ok
    assert result.error is not None
    assert result.code == code, result.to_dict()
    assert type(result.error).code == code
    assert result.error.retryable is (code in RETRYABLE)
    envelope = result.to_dict()
    assert envelope["error"]["code"] == code
    assert set(envelope["error"]) == {"code", "message", "retryable", "details"}
    if code != "internal_error":  # that one is the call whose audit row could not be written
        audit = glovebox.AuditLog(_isolated_env)
        try:
            rows = [row for row in audit.records() if row["call_id"] == result.meta["call_id"]]
            assert [row["outcome"] for row in rows] == [code]
        finally:
            audit.close()


@pytest.mark.parametrize("code", sorted(RUN_CASES))
def test_a_real_run_produces(
    code: str,
    _isolated_env: Path,
    build_guest: BuildGuest,
    build_example: BuildGuest,
    request: pytest.FixtureRequest,
) -> None:
    result = RUN_CASES[code](Ctx(_isolated_env, build_guest, build_example, request))
    status = RUN_STATUS.get(code, "failed")
    assert result.status == status and not result.ok and result.error is not None, result.to_dict()
    assert result.error.code == code and type(result.error).code == code
    assert result.error.retryable is (code in RETRYABLE)
    envelope = result.to_dict()
    assert envelope["error"]["code"] == code and envelope["status"] == status
    assert set(envelope["error"]) == {"code", "message", "retryable", "details"}
