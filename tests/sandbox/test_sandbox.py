"""Hostile guests against the sandbox: every failure has its exact code, and the host lives on.

Each guest is a small C tool in ``tests/guests/`` built from source for the session.
Every hostile call is followed by a call to ``echo`` on the same Runtime, to show
that one guest's failure leaves the host (engine, pool, linker) usable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import glovebox

#: Every test here runs on the native core and on the pure-Python path (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("sandbox_path")

MIB = 1024 * 1024
HOST_MAX_FUEL = 10_000_000_000

BuildGuest = Callable[[str], Path]


def register(runtime: glovebox.Runtime, build_guest: BuildGuest, guest: str, **manifest: Any) -> str:
    """Register ``tests/guests/<guest>.c`` under a name derived from it; return the name."""
    name = guest.replace("_", "-")
    runtime.register(build_guest(guest), manifest={"name": name, **manifest})
    return name


def assert_host_survives(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    """A following ordinary call on the same runtime still succeeds."""
    if not any(info.name == "echo" for info in runtime.tools()):
        register(runtime, build_guest, "echo")
    result = runtime.call("echo", {"still": "alive", "n": [1, 2.5, None]})
    assert result.ok, result.to_dict()
    assert result.output == {"still": "alive", "n": [1, 2.5, None]}


def call_failing(runtime: glovebox.Runtime, name: str, value: Any = None) -> glovebox.CallResult:
    result = runtime.call(name, value)
    assert not result.ok, result.to_dict()
    assert result.error is not None
    assert result.output is None
    envelope = result.to_dict()
    assert set(envelope["error"]) == {"code", "message", "retryable", "details"}
    return result


# -- resource limits -----------------------------------------------------------


def test_infinite_loop_hits_the_deadline(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    # Fuel at the host maximum, so it is the 200 ms wall-clock deadline that stops the loop.
    name = register(runtime, build_guest, "loop_forever", limits={"timeout_ms": 200, "fuel": HOST_MAX_FUEL})
    result = call_failing(runtime, name)
    assert result.code == "timeout"
    assert "200 ms" in result.error.message
    assert result.error.details == {"timeout_ms": 200}
    assert result.error.retryable is False
    assert 0 < result.meta["fuel_used"] < HOST_MAX_FUEL  # the deadline stopped it, not the fuel
    assert_host_survives(runtime, build_guest)


def test_long_loop_exhausts_fuel(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    name = register(runtime, build_guest, "fuel_burner", limits={"fuel": 1_000_000, "timeout_ms": 30_000})
    result = call_failing(runtime, name)
    assert result.code == "fuel_exhausted"
    assert "fuel (1000000 units)" in result.error.message
    assert result.error.details == {"fuel": 1_000_000}
    assert result.meta["fuel_used"] == 1_000_000
    assert_host_survives(runtime, build_guest)


def test_grow_until_refused_then_a_bare_fault_is_a_crash(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    # A refused memory.grow is not a trap; a guest that ignores the refusal and
    # faults without saying why is reported as the crash it is (README: "How
    # memory_limit is detected"). The host still survives.
    name = register(runtime, build_guest, "grow_bomb", limits={"memory_bytes": 4 * MIB})
    result = call_failing(runtime, name, "raw")
    assert result.code == "guest_trap"
    assert "out of bounds memory access" in result.error.message
    assert_host_survives(runtime, build_guest)


def test_grow_until_refused_then_sdk_out_of_memory_is_memory_limit(
    runtime: glovebox.Runtime, build_guest: BuildGuest
) -> None:
    name = register(runtime, build_guest, "grow_bomb", limits={"memory_bytes": 4 * MIB})
    result = call_failing(runtime, name, "sdk")
    assert result.code == "memory_limit"
    assert f"more than its {4 * MIB} bytes of memory" in result.error.message
    assert result.error.details["memory_bytes"] == 4 * MIB
    assert_host_survives(runtime, build_guest)


def test_malloc_null_handled_by_the_guest_is_its_own_error(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    name = register(runtime, build_guest, "malloc_bomb", limits={"memory_bytes": 8 * MIB})
    result = call_failing(runtime, name)
    assert result.code == "guest_error"
    found = re.fullmatch(r"malloc failed after (\d+) MiB", result.error.message)
    assert found is not None, result.error.message
    # Some blocks fit, and never more than the cap allows.
    assert 1 <= int(found.group(1)) < 8
    assert_host_survives(runtime, build_guest)


def test_sdk_buffer_out_of_memory_is_memory_limit(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    name = register(runtime, build_guest, "malloc_bomb_sdk", limits={"memory_bytes": 4 * MIB})
    result = call_failing(runtime, name)
    assert result.code == "memory_limit"
    assert f"more than its {4 * MIB} bytes of memory" in result.error.message
    assert result.error.details["memory_bytes"] == 4 * MIB
    assert_host_survives(runtime, build_guest)


def test_initial_memory_over_the_cap_is_refused_at_registration(
    runtime: glovebox.Runtime, build_guest: BuildGuest
) -> None:
    # big_static has an 8 MiB static array, so its initial memory is over 8 MiB.
    with pytest.raises(glovebox.InvalidArtifact, match=r"cannot be instantiated: .*4194304 bytes of memory"):
        register(runtime, build_guest, "big_static", limits={"memory_bytes": 4 * MIB})
    assert runtime.tools() == []
    # The same artifact with room for its memory registers and runs.
    name = register(runtime, build_guest, "big_static", limits={"memory_bytes": 16 * MIB})
    assert runtime.call(name, "a").output == 2 * ord('"')


# -- crashes -----------------------------------------------------------------------


def test_unreachable_is_a_guest_trap(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    name = register(runtime, build_guest, "trap_unreachable")
    result = call_failing(runtime, name)
    assert result.code == "guest_trap"
    assert "unreachable" in result.error.message
    assert result.error.details == {"trap": "wasm `unreachable` instruction executed"}
    assert_host_survives(runtime, build_guest)


def test_unbounded_recursion_exhausts_the_call_stack(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    name = register(runtime, build_guest, "recursion")
    result = call_failing(runtime, name)
    assert result.code == "guest_trap"
    assert "call stack exhausted" in result.error.message
    assert_host_survives(runtime, build_guest)


def test_shadow_stack_overflow_is_a_guest_trap(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    name = register(runtime, build_guest, "stack_overflow")
    result = call_failing(runtime, name)
    assert result.code == "guest_trap"
    assert "out of bounds memory access" in result.error.message
    assert_host_survives(runtime, build_guest)


# -- what the guest returns ------------------------------------------------------------


def test_output_over_the_limit(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    # Default output_bytes is 1 MiB; the guest returns a 2 MiB JSON string.
    name = register(runtime, build_guest, "output_flood")
    result = call_failing(runtime, name)
    assert result.code == "output_too_large"
    assert f"{2 * MIB} bytes, over its {MIB}-byte limit" in result.error.message
    assert result.error.details == {"output_bytes": 2 * MIB, "limit": MIB}
    assert_host_survives(runtime, build_guest)


def test_output_that_is_not_json(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    name = register(runtime, build_guest, "bad_json")
    result = call_failing(runtime, name)
    assert result.code == "invalid_output"
    assert "not JSON" in result.error.message
    assert result.error.details["excerpt"] == "not json"
    assert_host_survives(runtime, build_guest)


def test_output_that_is_not_utf8(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    name = register(runtime, build_guest, "bad_utf8")
    result = call_failing(runtime, name)
    assert result.code == "invalid_output"
    assert "invalid utf-8" in result.error.message
    assert_host_survives(runtime, build_guest)


def test_output_pointing_outside_memory(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    name = register(runtime, build_guest, "bad_pointer")
    result = call_failing(runtime, name)
    assert result.code == "invalid_output"
    assert "out of bounds of memory" in result.error.message
    assert_host_survives(runtime, build_guest)


def test_output_that_breaks_the_output_schema(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    schema = {"type": "object", "required": ["y"], "properties": {"y": {"type": "integer"}}}
    name = register(runtime, build_guest, "wrong_shape", output_schema=schema)
    result = call_failing(runtime, name)
    assert result.code == "invalid_output"
    assert "output schema" in result.error.message
    assert '"y" is a required property' in result.error.message
    assert result.error.details["schema_path"] == "/required"
    assert_host_survives(runtime, build_guest)


def test_guest_error_keeps_its_message(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    name = register(runtime, build_guest, "guest_error")
    result = call_failing(runtime, name, {"k": 1})
    assert result.code == "guest_error"
    assert result.error.message == "boom: the widget is broken (8 input bytes)"
    assert result.error.retryable is False
    assert_host_survives(runtime, build_guest)


def test_huge_error_message_is_truncated(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    name = register(runtime, build_guest, "error_flood")
    result = call_failing(runtime, name)
    assert result.code == "guest_error"
    assert result.error.message.startswith("flood:eeee")
    assert result.error.message.endswith("(truncated)")
    assert len(result.error.message) < 5_000  # 1 MiB came back from the guest
    assert_host_survives(runtime, build_guest)


# -- host functions ------------------------------------------------------------------


def test_log_flood_is_bounded(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    # ~4,500 fuel per gb_log line; 20,003 lines need ~90M fuel.
    name = register(runtime, build_guest, "logger", limits={"fuel": 1_000_000_000, "timeout_ms": 60_000})
    result = runtime.call(name, None)
    assert result.ok, result.to_dict()
    assert result.output == {"logged": True}
    logs = result.meta["logs"]
    assert logs[:3] == [
        {"level": "info", "message": "starting"},
        {"level": "info", "message": "working on 3 things"},
        {"level": "info", "message": "done"},
    ]
    log_bytes = glovebox.Limits().log_bytes
    assert sum(len(line["message"].encode()) for line in logs) <= log_bytes
    assert result.meta["logs_dropped"] > 0
    assert len(logs) + result.meta["logs_dropped"] == 20_003
    assert_host_survives(runtime, build_guest)


def test_http_without_a_grant_is_denied(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    name = register(runtime, build_guest, "http_denied")
    result = runtime.call(name, None)
    assert result.ok, result.to_dict()
    assert result.output["status"] == "denied"
    assert "not granted" in result.output["reason"]
    [denial] = result.meta["denials"]
    assert denial["capability"] == "http"
    assert denial["method"] == "GET"
    assert denial["url"] == "https://example.com/"
    assert "not granted" in denial["reason"]
    assert_host_survives(runtime, build_guest)


# -- the call envelope -----------------------------------------------------------------------


def test_required_scopes_without_a_policy_are_denied(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    name = register(runtime, build_guest, "echo", required_scopes=["files:read"])
    result = call_failing(runtime, name, {"x": 1})
    assert result.code == "permission_denied"
    assert "files:read" in result.error.message
    assert result.error.details["missing_scopes"] == ["files:read"]
    assert result.meta["fuel_used"] == 0  # refused before any instance ran


def test_unknown_tool(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    register(runtime, build_guest, "echo")
    result = call_failing(runtime, "no-such-tool", {})
    assert result.code == "tool_not_found"
    assert "'no-such-tool'" in result.error.message
    assert "echo" in result.error.message  # says what is available
    assert result.error.details == {"tool": "no-such-tool"}
    missing_version = call_failing(runtime, "echo@9.9.9", {})
    assert missing_version.code == "tool_not_found"


def test_input_failing_the_schema(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    schema = {
        "type": "object",
        "required": ["n"],
        "properties": {"n": {"type": "integer"}},
        "additionalProperties": False,
    }
    name = register(runtime, build_guest, "echo", input_schema=schema)
    assert runtime.call(name, {"n": 3}).output == {"n": 3}
    result = call_failing(runtime, name, {"n": "three"})
    assert result.code == "invalid_input"
    assert '"three" is not of type "integer"' in result.error.message
    assert result.error.details["path"] == "/n"
    assert result.meta["fuel_used"] == 0
    missing = call_failing(runtime, name, {})
    assert missing.code == "invalid_input"
    assert missing.error.details["path"] == "/"


@pytest.mark.parametrize("value", [{1, 2}, float("nan"), object(), {"a": b"bytes"}])
def test_input_that_is_not_json(runtime: glovebox.Runtime, build_guest: BuildGuest, value: Any) -> None:
    name = register(runtime, build_guest, "echo")
    result = call_failing(runtime, name, value)
    assert result.code == "invalid_input"
    assert "not a JSON value" in result.error.message


def test_echo_round_trips_json(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    name = register(runtime, build_guest, "echo")
    value = {"text": "héllo \u2603 \U0001f600", "nested": [{"a": None}, True, -1.5e-3], "empty": ""}
    result = runtime.call(name, value)
    assert result.ok
    assert result.output == value
    envelope = result.to_dict()
    assert envelope["ok"] is True
    meta = envelope["meta"]
    assert {"call_id", "tool", "version", "digest", "principal", "duration_ms", "fuel_used"} <= set(meta)
    assert meta["tool"] == "echo"
    assert meta["version"] == "0.0.0"
    assert meta["digest"].startswith("sha256:")
    assert meta["fuel_used"] > 0


# -- many calls ---------------------------------------------------------------------------------

# 1,000 fresh instances may not grow resident memory by more than this. A leak
# of a single 64 KiB wasm page (or one Store) per call would grow it by over
# 60 MiB; allocator noise and Python-level caches stay within a few MiB.
RSS_GROWTH_BOUND_BYTES = 16 * MIB


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs Linux /proc")
def test_a_thousand_calls_do_not_grow_memory(runtime: glovebox.Runtime, build_guest: BuildGuest) -> None:
    name = register(runtime, build_guest, "echo")
    payload = {"text": "x" * 1000, "n": list(range(50))}
    for _ in range(100):  # warm up: compile cache, pool slots, validators
        assert runtime.call(name, payload).ok
    before = _resident_bytes()
    for i in range(1000):
        result = runtime.call(name, payload)
        assert result.ok, (i, result.to_dict())
    growth = _resident_bytes() - before
    assert growth < RSS_GROWTH_BOUND_BYTES, f"resident memory grew by {growth} bytes over 1,000 calls"
