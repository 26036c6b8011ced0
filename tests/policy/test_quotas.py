"""Quotas per principal: each bound at its exact edge with real calls, windows moved by an injected clock.

The clock of the quota counters is replaced by a list the test moves, so
"after the window" is reached without sleeping. Calls in flight are held in a
real HTTP server on 127.0.0.1 that answers only when the test lets it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

import glovebox
from glovebox.cli._main import cli
from glovebox.policy import QuotaUsage, dead_entries, parse_policy

from ..capabilities.test_http import QuietHandler, in_thread

BuildGuest = Callable[[str], Path]
#: How long the held upstream waits at most (released at once when the test ends).
HOLD_SECONDS = 30.0


class Clock:
    """A monotonic clock that moves only when the test says so."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def runtime(home: Path, policy: str, clock: Clock) -> glovebox.Runtime:
    rt = glovebox.Runtime(home=home, policy=parse_policy(policy))
    rt._gate.quotas.clock = clock
    return rt


def policy(*quotas: str, rules: str = "") -> str:
    return "version: 1\ndefaults: {action: allow}\n" + rules + "quotas:\n" + "".join(f"  - {q}\n" for q in quotas)


def assert_limited(result: glovebox.CallResult, quota: str, limit: int, retry_after_ms: int) -> None:
    assert not result.ok and result.code == "rate_limited", result.to_dict()
    assert result.error is not None and result.error.retryable
    assert result.error.details == {"quota": quota, "limit": limit, "retry_after_ms": retry_after_ms}
    assert result.meta["fuel_used"] == 0 and "logs" not in result.meta  # nothing ran


@pytest.fixture
def echo(build_guest: BuildGuest) -> Path:
    return build_guest("echo")


# -- calls per minute -----------------------------------------------------------------------------


def test_calls_per_minute_at_its_exact_bound_and_after_the_window(_isolated_env: Path, echo: Path) -> None:
    clock = Clock(1000.0)
    with runtime(_isolated_env, policy("{tool: echo, calls_per_minute: 3}"), clock) as rt:
        rt.register(echo, {"name": "echo"})
        assert all(rt.call("echo", {"i": i}, principal="agent").ok for i in range(3))
        clock.now = 1030.25
        assert_limited(rt.call("echo", {}, principal="agent"), "quotas[0].calls_per_minute", 3, 30_750)
        clock.now = 1060.999  # the calls of second 1000 count until 1061 exactly
        assert_limited(rt.call("echo", {}, principal="agent"), "quotas[0].calls_per_minute", 3, 1)
        clock.now = 1061.0
        assert rt.call("echo", {"again": True}, principal="agent").ok
        assert rt.call("echo", {}, principal="agent").ok
        assert rt.call("echo", {}, principal="agent").ok
        assert rt.call("echo", {}, principal="agent").code == "rate_limited"


def test_the_window_slides_second_by_second(_isolated_env: Path, echo: Path) -> None:
    clock = Clock(1000.5)
    with runtime(_isolated_env, policy("{tool: echo, calls_per_minute: 2}"), clock) as rt:
        rt.register(echo, {"name": "echo"})
        assert rt.call("echo", {}, principal="agent").ok
        clock.now = 1020.0
        assert rt.call("echo", {}, principal="agent").ok
        clock.now = 1040.0
        assert_limited(rt.call("echo", {}, principal="agent"), "quotas[0].calls_per_minute", 2, 21_000)
        clock.now = 1061.0  # the first call has left the window, the second has not
        assert rt.call("echo", {}, principal="agent").ok
        assert_limited(rt.call("echo", {}, principal="agent"), "quotas[0].calls_per_minute", 2, 20_000)


def test_each_principal_has_its_own_counter(_isolated_env: Path, echo: Path) -> None:
    clock = Clock()
    with runtime(_isolated_env, policy("{tool: '*', principals: ['*'], calls_per_minute: 1}"), clock) as rt:
        rt.register(echo, {"name": "echo"})
        assert rt.call("echo", {}, principal="agent").ok
        assert rt.call("echo", {}, principal="agent").code == "rate_limited"
        assert rt.call("echo", {}, principal="analyst").ok
        assert rt.call("echo", {}).ok  # anonymous
        assert rt.call("echo", {}, principal="analyst").code == "rate_limited"
        assert rt.call("echo", {}).code == "rate_limited"


def test_a_quota_for_some_principals_leaves_the_others_alone(_isolated_env: Path, echo: Path) -> None:
    with runtime(_isolated_env, policy("{tool: echo, principals: [agent], calls_per_minute: 1}"), Clock()) as rt:
        rt.register(echo, {"name": "echo"})
        assert rt.call("echo", {}, principal="agent").ok
        assert rt.call("echo", {}, principal="agent").code == "rate_limited"
        assert all(rt.call("echo", {}, principal="analyst").ok for _ in range(5))


def test_every_matching_entry_applies_and_the_last_to_free_up_is_named(_isolated_env: Path, echo: Path) -> None:
    clock = Clock(1000.0)
    quotas = policy("{tool: '*', calls_per_minute: 3}", "{tool: echo, calls_per_minute: 1}")
    with runtime(_isolated_env, quotas, clock) as rt:
        rt.register(echo, {"name": "echo"})
        rt.register(echo, {"name": "echo2"})
        assert rt.call("echo", {}, principal="agent").ok
        assert_limited(rt.call("echo", {}, principal="agent"), "quotas[1].calls_per_minute", 1, 61_000)
        assert rt.call("echo2", {}, principal="agent").ok  # the refused call counted nowhere
        clock.now = 1010.0
        assert rt.call("echo2", {}, principal="agent").ok
        assert_limited(rt.call("echo2", {}, principal="agent"), "quotas[0].calls_per_minute", 3, 51_000)
        clock.now = 1061.0  # quotas[1] has room again, quotas[0] holds the call of second 1010
        assert rt.call("echo", {}, principal="agent").ok
        assert_limited(rt.call("echo", {}, principal="agent"), "quotas[1].calls_per_minute", 1, 61_000)


def test_a_blocked_call_never_counts(_isolated_env: Path, echo: Path) -> None:
    rules = "rules:\n  - {tool: secret, principals: [agent], action: block}\n"
    with runtime(_isolated_env, policy("{tool: '*', calls_per_minute: 1}", rules=rules), Clock()) as rt:
        rt.register(echo, {"name": "echo"})
        rt.register(echo, {"name": "secret"})
        assert [rt.call("secret", {}, principal="agent").code for _ in range(3)] == ["permission_denied"] * 3
        assert rt.call("echo", {}, principal="agent").ok


def test_a_call_that_fails_after_admission_counts(_isolated_env: Path, echo: Path) -> None:
    schema = {"type": "object", "required": ["n"]}
    with runtime(_isolated_env, policy("{tool: echo, calls_per_minute: 2}"), Clock()) as rt:
        rt.register(echo, {"name": "echo", "input_schema": schema})
        assert rt.call("echo", {}, principal="agent").code == "invalid_input"
        assert rt.call("echo", {"n": 1}, principal="agent").ok
        assert rt.call("echo", {"n": 1}, principal="agent").code == "rate_limited"


# -- fuel per minute ------------------------------------------------------------------------------


def fuel_of_one_echo(home: Path, echo: Path) -> int:
    with glovebox.Runtime(home=home) as rt:
        rt.register(echo, {"name": "echo"})
        fuel = rt.call("echo", {"x": 1}).meta["fuel_used"]
    assert isinstance(fuel, int) and fuel > 0
    return fuel


def test_fuel_per_minute_at_its_exact_bound(_isolated_env: Path, echo: Path) -> None:
    fuel = fuel_of_one_echo(_isolated_env, echo)
    clock = Clock(1000.0)
    with runtime(_isolated_env, policy(f"{{tool: echo, fuel_per_minute: {2 * fuel}}}"), clock) as rt:
        results = [rt.call("echo", {"x": 1}, principal="agent") for _ in range(2)]
        assert [r.meta["fuel_used"] for r in results] == [fuel, fuel]
        clock.now = 1000.5
        assert_limited(rt.call("echo", {"x": 1}, principal="agent"), "quotas[0].fuel_per_minute", 2 * fuel, 60_500)
        assert rt.call("echo", {"x": 1}, principal="analyst").ok
        clock.now = 1061.0
        assert rt.call("echo", {"x": 1}, principal="agent").ok


def test_fuel_is_charged_when_a_call_ends_so_one_call_may_overrun(_isolated_env: Path, echo: Path) -> None:
    fuel = fuel_of_one_echo(_isolated_env, echo)
    clock = Clock(1000.0)
    with runtime(_isolated_env, policy(f"{{tool: echo, fuel_per_minute: {2 * fuel + 1}}}"), clock) as rt:
        # 2·fuel used is under the bound, so a third call runs and overruns it once.
        assert all(rt.call("echo", {"x": 1}, principal="agent").ok for _ in range(3))
        clock.now = 1005.0
        result = rt.call("echo", {"x": 1}, principal="agent")
        assert_limited(result, "quotas[0].fuel_per_minute", 2 * fuel + 1, 56_000)


def test_refused_calls_count_against_no_window(_isolated_env: Path, echo: Path) -> None:
    fuel = fuel_of_one_echo(_isolated_env, echo)
    quotas = policy(f"{{tool: echo, fuel_per_minute: {fuel}}}", "{tool: echo, calls_per_minute: 1}")
    clock = Clock(1000.0)
    with runtime(_isolated_env, quotas, clock) as rt:
        assert rt.call("echo", {"x": 1}, principal="agent").ok
        clock.now = 1030.0
        for _ in range(3):
            assert rt.call("echo", {"x": 1}, principal="agent").code == "rate_limited"
        clock.now = 1061.0  # the one call that ran has left both windows; the refusals were never in them
        assert rt.call("echo", {"x": 1}, principal="agent").ok


# -- calls in flight ------------------------------------------------------------------------------


class _Held(QuietHandler):
    server: _HeldServer

    def do_GET(self) -> None:
        if self.path == "/hold":
            self.server.arrived.release()
            self.server.release.wait(HOLD_SECONDS)
        self._reply(200, b"{}")


class _HeldServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    arrived: threading.Semaphore
    release: threading.Event


@dataclass
class Upstream:
    port: int
    arrived: threading.Semaphore
    release: threading.Event

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    """A server on 127.0.0.1 whose /hold answers only when released (other paths at once)."""
    httpd = _HeldServer(("127.0.0.1", 0), _Held)
    httpd.arrived, httpd.release = threading.Semaphore(0), threading.Event()
    with in_thread(httpd, httpd.release.set):
        yield Upstream(int(httpd.server_address[1]), httpd.arrived, httpd.release)


def in_flight_runtime(home: Path, build_guest: BuildGuest, upstream: Upstream, clock: Clock) -> glovebox.Runtime:
    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [upstream.port], "paths": ["/**"], "allow_private": True}
    grants = f"grants:\n  - {{tool: hc, http: [{json.dumps(rule)}]}}\n"
    rt = runtime(home, policy("{tool: hc, principals: [agent], max_in_flight: 1}", rules=grants), clock)
    manifest = {"name": "hc", "capabilities": {"http": [rule]}, "limits": {"timeout_ms": 5000}}
    rt.register(build_guest("http_client"), manifest)
    return rt


def get(rt: glovebox.Runtime, url: str, principal: str) -> glovebox.CallResult:
    return rt.call("hc", {"method": "GET", "url": url}, principal=principal)


def test_max_in_flight_at_its_exact_bound(_isolated_env: Path, build_guest: BuildGuest, upstream: Upstream) -> None:
    clock = Clock(1000.0)
    with in_flight_runtime(_isolated_env, build_guest, upstream, clock) as rt:
        held: list[glovebox.CallResult] = []
        worker = threading.Thread(target=lambda: held.append(get(rt, upstream.url("/hold"), "agent")))
        worker.start()
        try:
            assert upstream.arrived.acquire(timeout=HOLD_SECONDS)  # the first call is in flight
            clock.now = 1001.5  # it was admitted at 1000 with a 5 s deadline
            assert_limited(get(rt, upstream.url("/"), "agent"), "quotas[0].max_in_flight", 1, 3500)
            assert get(rt, upstream.url("/"), "analyst").ok  # another principal
        finally:
            upstream.release.set()
            worker.join()
        assert held[0].ok and held[0].output["http_status"] == 200, held[0].to_dict()
        assert get(rt, upstream.url("/"), "agent").ok  # the slot is free again
        assert get(rt, upstream.url("/"), "agent").ok


def test_failed_calls_free_their_slot(_isolated_env: Path, build_guest: BuildGuest) -> None:
    with runtime(_isolated_env, policy("{tool: '*', max_in_flight: 1}"), Clock()) as rt:
        rt.register(build_guest("trap_unreachable"), {"name": "trap"})
        rt.register(build_guest("echo"), {"name": "echo", "input_schema": {"type": "object", "required": ["n"]}})
        assert [rt.call("trap", {}, principal="agent").code for _ in range(3)] == ["guest_trap"] * 3
        assert [rt.call("echo", {}, principal="agent").code for _ in range(3)] == ["invalid_input"] * 3
        assert rt.call("nope", {}, principal="agent").code == "tool_not_found"
        assert rt.call("echo", {"n": 1}, principal="agent").ok


def test_the_http_api_answers_429_with_retry_after(
    _isolated_env: Path, echo: Path, serve_app: Callable[[object], str]
) -> None:
    import httpx

    from glovebox.servers import create_app

    clock = Clock(1000.0)
    with runtime(_isolated_env, policy("{tool: echo, calls_per_minute: 1}"), clock) as rt:
        rt.register(echo, {"name": "echo"})
        url = serve_app(create_app(rt, insecure_anonymous=True))
        with httpx.Client(base_url=url) as client:
            assert client.post("/v1/tools/echo/call", json={"input": {}}).status_code == 200
            clock.now = 1000.25
            refused = client.post("/v1/tools/echo/call", json={"input": {}})
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "61"  # 60,750 ms, rounded up
    assert refused.json()["error"]["details"]["retry_after_ms"] == 60_750


# -- the audit row, explain, check ----------------------------------------------------------------


def test_a_rate_limited_call_leaves_one_audit_row(_isolated_env: Path, echo: Path) -> None:
    with runtime(_isolated_env, policy("{tool: echo, calls_per_minute: 1}"), Clock()) as rt:
        rt.register(echo, {"name": "echo"})
        assert rt.call("echo", {"a": 1}, principal="agent").ok
        refused = rt.call("echo", {"a": 2}, principal="agent")
        rows = rt.audit.tail(10)
    assert refused.code == "rate_limited"
    assert [row["outcome"] for row in rows[-2:]] == ["ok", "rate_limited"]
    assert len(rows) == 2
    row = rows[-1]
    assert (row["call_id"], row["principal"], row["fuel_used"]) == (refused.meta["call_id"], "agent", 0)
    assert row["decision"] == "allow"


def test_explain_lists_the_matching_quotas(_isolated_env: Path, echo: Path, tmp_path: Path) -> None:
    text = policy(
        "{tool: echo, principals: [agent], max_in_flight: 2, calls_per_minute: 30}",
        "{tool: other, fuel_per_minute: 5}",
        "{tool: '*', fuel_per_minute: 1000000}",
    )
    with runtime(_isolated_env, text, Clock()) as rt:
        rt.register(echo, {"name": "echo"})
        decision = rt.explain("echo", principal="agent")
        assert [index for index, _ in decision.quotas] == [0, 2]
        assert rt.explain("echo", principal="analyst").to_dict()["quotas"] == [
            {"entry": "quotas[2]", "tool": "*", "principals": ["*"], "fuel_per_minute": 1000000}
        ]
    file = tmp_path / "quotas.yaml"
    file.write_text(text)
    runner = CliRunner()
    args = ["--policy", str(file), "policy", "explain", "--principal", "agent", "--tool", "echo"]
    shown = runner.invoke(cli, args, catch_exceptions=False)
    assert shown.exit_code == 0
    assert shown.stdout.endswith(
        "quotas:\n"
        "  quotas[0] (tool 'echo', principals ['agent']): max_in_flight 2, calls_per_minute 30, per principal\n"
        "  quotas[2] (tool '*', principals ['*']): fuel_per_minute 1000000, per principal\n"
        "guards: not idempotent\n"  # the guards come last
    )
    as_json = json.loads(runner.invoke(cli, [*args, "--json"], catch_exceptions=False).stdout)
    assert as_json["quotas"][0] == {
        "entry": "quotas[0]",
        "tool": "echo",
        "principals": ["agent"],
        "max_in_flight": 2,
        "calls_per_minute": 30,
    }
    other = runner.invoke(cli, ["--policy", str(file), "policy", "explain", "--principal", "x", "--tool", "echo"])
    assert "quotas:\n  quotas[2] " in other.stdout


def test_explain_without_quotas_says_none(_isolated_env: Path, echo: Path) -> None:
    with glovebox.Runtime(home=_isolated_env) as rt:
        rt.register(echo, {"name": "echo"})
    shown = CliRunner().invoke(cli, ["policy", "explain", "--principal", "a", "--tool", "echo"], catch_exceptions=False)
    assert shown.stdout.endswith("quotas: none\nguards: not idempotent\n")


def test_policy_check_reports_dead_quotas() -> None:
    document = parse_policy(
        "version: 1\nprincipals: {agent: {}}\nquotas:\n"
        "  - {tool: nothing, calls_per_minute: 1}\n  - {tool: echo, principals: [ghost], max_in_flight: 1}\n"
    )
    echo = glovebox.ToolInfo(
        manifest=glovebox.Manifest(name="echo"), digest="sha256:" + "0" * 64, registered_at="", size_bytes=0
    )
    assert dead_entries(document, [echo]) == [
        "quotas[0]: tool pattern 'nothing' matches no registered tool",
        "quotas[1]: principals ['ghost'] match no principal in the policy",
    ]


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ("{tool: echo}", "quotas.0"),
        ("{calls_per_minute: 0}", "quotas.0.calls_per_minute"),
        ("{rpm: 3}", "quotas.0.rpm"),
    ],
)
def test_a_quota_needs_a_positive_bound_and_known_fields(entry: str, field: str) -> None:
    with pytest.raises(glovebox.InvalidPolicy) as info:
        parse_policy(policy(entry), "q.yaml")
    assert info.value.details["field"] == field
    assert info.value.details["line"] == 4


# -- the counters ---------------------------------------------------------------------------------


def test_counters_survive_a_reload_of_unchanged_entries() -> None:
    clock = Clock()
    usage = QuotaUsage(clock)
    first = parse_policy(policy("{tool: '*', calls_per_minute: 1}", "{tool: x, calls_per_minute: 1}"))
    usage.admit(first, list(enumerate(first.quotas))[:1], "agent", 1000)
    same = parse_policy(policy("{tool: '*', calls_per_minute: 1}"))
    with pytest.raises(glovebox.RateLimited):
        usage.admit(same, list(enumerate(same.quotas)), "agent", 1000)
    changed = parse_policy(policy("{tool: '*', calls_per_minute: 2}"))
    usage.admit(changed, list(enumerate(changed.quotas)), "agent", 1000)  # a new entry starts from zero


def test_idle_counters_are_dropped() -> None:
    clock = Clock()
    usage = QuotaUsage(clock)
    document = parse_policy(policy("{tool: '*', calls_per_minute: 1, max_in_flight: 1}"))
    matches = list(enumerate(document.quotas))
    tickets = [usage.admit(document, matches, f"p{i}", 1000) for i in range(100)]
    usage.release(tickets[0], 0)
    clock.now += 120
    usage.release(usage.admit(document, matches, "late", 1000), 0)
    assert len(usage._usage) == 100  # 99 still in flight, and the newcomer
    for ticket in tickets[1:]:
        usage.release(ticket, 0)
    clock.now += 120
    usage.admit(document, matches, "late", 1000)
    assert len(usage._usage) == 1
