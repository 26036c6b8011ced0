"""Unit tests of glovebox.sandbox._outcome.call_error: one test per branch.

The wasmtime texts are copied from what wasmtime 50 produces for a component
call (see TOOLCHAINS.md); a few real traps from inline WAT make sure the
synthetic ones look like the real thing. Real calls producing each code are in
``test_error_codes.py``.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import wasmtime

from glovebox import CallError, Limits
from glovebox.sandbox._outcome import MAX_ERROR_MESSAGE_CHARS, Ending, call_error, returned_error

MIB = 1024 * 1024
LIMITS = Limits(fuel=5_000, memory_bytes=4 * MIB, timeout_ms=250)

BACKTRACE = "error while executing at wasm backtrace:\n    0:    0x614 - <unknown>!<wasm function 6>\n\n"


def trap_text(reason: str, *context: str) -> str:
    """A component-call error text ending in ``wasm trap: <reason>``."""
    if not context:
        return f"{BACKTRACE}Caused by:\n    wasm trap: {reason}\n"
    lines = [f"    {i}: {line}" for i, line in enumerate([*context, f"wasm trap: {reason}"])]
    return BACKTRACE + "Caused by:\n" + "\n".join(lines) + "\n"


def failure(
    text: str | BaseException,
    *,
    fuel_left: int | None = 1_000,
    deadline_passed: bool = False,
    instantiating: bool = False,
    guest_reported_oom: bool = False,
    limits: Limits = LIMITS,
) -> Ending:
    exc = wasmtime.WasmtimeError(text) if isinstance(text, str) else text
    return Ending(
        limits,
        exc=exc,
        fuel_left=fuel_left,
        deadline_passed=deadline_passed,
        instantiating=instantiating,
        guest_reported_oom=guest_reported_oom,
    )


def classify(end: Ending) -> CallError:
    error = call_error(end)
    assert error is not None
    return error


def fault(address: int, size: int) -> str:
    return trap_text(
        "out of bounds memory access", f"memory fault at wasm address {address:#x} in linear memory of size {size:#x}"
    )


# -- fuel and time: what the store says comes first ------------------------------------------


def test_no_fuel_left_is_fuel_exhausted_whatever_the_text() -> None:
    error = classify(failure(trap_text("wasm `unreachable` instruction executed"), fuel_left=0))
    assert error.code == "fuel_exhausted"
    assert "5000 units" in error.message
    assert error.details == {"fuel": 5_000}
    assert error.retryable is False


def test_fuel_text_alone_is_fuel_exhausted() -> None:
    error = classify(failure(trap_text("all fuel consumed by WebAssembly"), fuel_left=None))
    assert error.code == "fuel_exhausted"


def test_deadline_passed_is_timeout_whatever_the_text() -> None:
    error = classify(failure(trap_text("out of bounds memory access"), deadline_passed=True))
    assert error.code == "timeout"
    assert "250 ms" in error.message
    assert error.details == {"timeout_ms": 250}


def test_interrupt_text_is_timeout() -> None:
    error = classify(failure(trap_text("interrupt")))
    assert error.code == "timeout"
    assert error.message == "the tool did not finish within its 250 ms deadline"


def test_fuel_wins_over_interrupt() -> None:
    # Both ran out; the store's fuel counter is the more precise witness.
    assert classify(failure(trap_text("interrupt"), fuel_left=0, deadline_passed=True)).code == "fuel_exhausted"


# -- memory -------------------------------------------------------------------------------------


def test_instantiation_over_the_memory_cap() -> None:
    text = "memory minimum size of 130 pages exceeds memory limits"
    error = classify(failure(text, instantiating=True))
    assert error.code == "memory_limit"
    assert error.message == f"the tool needed more than its {4 * MIB} bytes of memory to start"
    assert error.details == {"memory_bytes": 4 * MIB}


def test_instantiation_memory_text_outside_instantiation_is_not_memory_limit() -> None:
    error = classify(failure("memory minimum size of 130 pages exceeds memory limits"))
    assert error.code == "internal_error"


def test_fault_past_the_end_of_a_memory_near_the_cap() -> None:
    size = 4 * MIB - 64 * 1024  # the last grow was refused
    error = classify(failure(fault(size, size)))
    assert error.code == "memory_limit"
    assert f"more than its {4 * MIB} bytes" in error.message
    assert error.details == {"memory_bytes": 4 * MIB, "memory_size": size}


def test_fault_past_the_end_of_a_small_memory_is_a_crash() -> None:
    # 128 KiB of a 4 MiB cap: a wild pointer, not exhaustion.
    error = classify(failure(fault(0x20000, 0x20000)))
    assert error.code == "guest_trap"
    assert error.message == "the tool crashed: out of bounds memory access"
    assert error.details == {"trap": "out of bounds memory access"}


def test_fault_inside_a_memory_near_the_cap_is_a_crash() -> None:
    # Not past the end, so not memory the guest was refused.
    size = 4 * MIB
    assert classify(failure(fault(size - 16, size))).code == "guest_trap"


def test_guest_reported_oom_then_trap() -> None:
    error = classify(failure(trap_text("wasm `unreachable` instruction executed"), guest_reported_oom=True))
    assert error.code == "memory_limit"
    assert error.details == {"memory_bytes": 4 * MIB}


def test_guest_reported_oom_without_a_trap_is_not_memory_limit() -> None:
    # A lifting failure after an OOM log line is still the malformed result it is.
    error = classify(failure("invalid utf-8 sequence of 1 bytes from index 1", guest_reported_oom=True))
    assert error.code == "invalid_output"


# -- lifting the result -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "invalid utf-8 sequence of 1 bytes from index 1",
        "string pointer/length out of bounds of memory",
        "invalid variant discriminant for `result`",
        "realloc return: beyond end of memory",
    ],
)
def test_lift_errors_are_invalid_output(text: str) -> None:
    error = classify(failure(f"failed to lift the result\n\nCaused by:\n    {text}\n"))
    assert error.code == "invalid_output"
    assert error.message == f"the tool returned a malformed result: {text}"
    assert error.details == {"reason": text}


def test_lift_text_while_instantiating_is_not_invalid_output() -> None:
    assert classify(failure("invalid utf-8 sequence", instantiating=True)).code == "internal_error"


# -- crashes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reason",
    [
        "wasm `unreachable` instruction executed",
        "call stack exhausted",
        "integer divide by zero",
        "indirect call type mismatch",
        "out of bounds memory access",
    ],
)
def test_trap_text_is_a_guest_trap(reason: str) -> None:
    error = classify(failure(trap_text(reason)))
    assert error.code == "guest_trap"
    assert error.message == f"the tool crashed: {reason}"
    assert error.details == {"trap": reason}
    assert error.retryable is False


def test_trap_object_without_trap_text_is_a_guest_trap() -> None:
    error = classify(failure(wasmtime.Trap("guest-defined failure")))
    assert error.code == "guest_trap"
    assert error.details == {"trap": "guest-defined failure"}


def test_exit_trap_is_a_guest_trap_with_the_status() -> None:
    exc = wasmtime.ExitTrap("Exited with i32 exit status 3")
    exc.code = 3
    error = classify(failure(exc))
    assert error.code == "guest_trap"
    assert error.message == "the tool exited with status 3"
    assert error.details == {"exit_status": 3}


# -- host-side failures -------------------------------------------------------------------------


def test_pool_exhaustion_is_overloaded() -> None:
    text = "maximum concurrent memory limit of 12000 reached for stores"
    error = classify(failure(text, instantiating=True))
    assert error.code == "overloaded"
    assert error.retryable is True
    assert error.details["retry_after_ms"] > 0
    assert "pool is full" in error.message
    # Even when the store also reports no fuel (it never ran).
    assert classify(failure(text, fuel_left=0, instantiating=True)).code == "overloaded"


def test_unknown_error_is_opaque(caplog: pytest.LogCaptureFixture) -> None:
    secret = "host path /srv/secret/key.pem: permission denied"
    with caplog.at_level(logging.ERROR, logger="glovebox"):
        error = classify(failure(secret))
    assert error.code == "internal_error"
    assert error.retryable is False
    assert "secret" not in error.message and "/srv" not in error.message
    assert error.details == {}
    assert secret in caplog.text  # the detail goes to the log


# -- real wasmtime errors, to keep the synthetic texts honest -----------------------------------


def _run_core(wat: str, fuel: int = 1_000_000) -> BaseException:
    config = wasmtime.Config()
    config.consume_fuel = True
    engine = wasmtime.Engine(config)
    store = wasmtime.Store(engine)
    store.set_fuel(fuel)
    instance = wasmtime.Instance(store, wasmtime.Module(engine, wat), [])
    run = instance.exports(store)["run"]
    assert isinstance(run, wasmtime.Func)
    with pytest.raises((wasmtime.Trap, wasmtime.WasmtimeError)) as info:
        run(store)
    return info.value


def test_real_unreachable_trap() -> None:
    exc = _run_core('(module (func (export "run") unreachable))')
    assert isinstance(exc, wasmtime.Trap)
    assert exc.trap_code == wasmtime.TrapCode.UNREACHABLE
    error = classify(failure(exc))
    assert error.code == "guest_trap"
    assert "unreachable" in error.message


def test_real_out_of_fuel_trap() -> None:
    exc = _run_core('(module (func (export "run") (loop (br 0))))', fuel=1_000)
    assert isinstance(exc, wasmtime.Trap)
    assert exc.trap_code == wasmtime.TrapCode.OUT_OF_FUEL
    # Even without the store's word, the text alone is enough.
    assert classify(failure(exc, fuel_left=None)).code == "fuel_exhausted"


# -- the guest's own result -----------------------------------------------------------------------


def returned(is_ok: bool, payload: str, **facts: Any) -> Ending:
    return Ending(LIMITS, fuel_left=1_000, guest_result=(is_ok, payload), **facts)


def test_ok_within_the_output_limit_is_no_error() -> None:
    assert call_error(returned(True, '{"a": 1}')) is None


def test_ok_over_the_output_limit() -> None:
    limits = Limits(output_bytes=1024)
    payload = '"' + "é" * 600 + '"'  # 1202 bytes in UTF-8, 602 characters
    error = call_error(Ending(limits, guest_result=(True, payload)))
    assert error is not None and error.code == "output_too_large"
    assert error.details == {"output_bytes": 1202, "limit": 1024}


def test_err_payload_is_a_guest_error_in_its_own_words() -> None:
    error = classify(returned(False, "no such city"))
    assert error.code == "guest_error"
    assert error.message == "no such city"
    assert classify(returned(False, "")).message == "the tool reported an error without a message"


def test_long_err_payload_is_truncated() -> None:
    error = classify(returned(False, "x" * 10_000))
    assert error.message == "x" * MAX_ERROR_MESSAGE_CHARS + " …(truncated)"


def test_neither_exception_nor_result_is_internal() -> None:
    assert classify(Ending(LIMITS)).code == "internal_error"


# -- what the host functions saw ----------------------------------------------------------------

DENIAL = {"capability": "http", "method": "GET", "url": "https://example.com/", "reason": "not granted"}
UPSTREAM = {"capability": "http", "method": "GET", "url": "http://127.0.0.1:9/x", "reason": "HTTP 503", "status": 503}


@pytest.mark.parametrize("is_ok", [True, False])
def test_a_host_call_out_of_time_is_a_timeout_whatever_the_guest_did(is_ok: bool) -> None:
    error = classify(returned(is_ok, "{}", timed_out_in_host=True, upstream_failures=[UPSTREAM]))
    assert error.code == "timeout"
    assert error.message == "the tool did not finish within its 250 ms deadline (waiting on the network)"
    assert error.details == {"timeout_ms": 250}


def test_guest_error_after_a_denial_is_capability_denied() -> None:
    error = classify(returned(False, "weather API unreachable", denials=[DENIAL]))
    assert error.code == "capability_denied"
    assert error.message == (
        "the tool failed after the host refused http access (GET https://example.com/): not granted"
    )
    assert error.details == {
        "denials": [DENIAL],
        "guest_code": "guest_error",
        "guest_message": "weather API unreachable",
    }
    assert error.retryable is False


def test_guest_trap_after_an_upstream_failure_is_upstream_error() -> None:
    exc = trap_text("wasm `unreachable` instruction executed")
    end = Ending(LIMITS, exc=wasmtime.WasmtimeError(exc), fuel_left=1_000, upstream_failures=[UPSTREAM])
    error = classify(end)
    assert error.code == "upstream_error"
    assert error.retryable is True
    assert error.message == "the tool failed after an upstream request failed (GET http://127.0.0.1:9/x): HTTP 503"
    assert error.details == {
        "upstream_failures": [UPSTREAM],
        "guest_code": "guest_trap",
        "guest_message": "the tool crashed: wasm `unreachable` instruction executed",
    }


def test_a_denial_outweighs_an_upstream_failure() -> None:
    error = classify(returned(False, "failed", denials=[DENIAL], upstream_failures=[UPSTREAM]))
    assert error.code == "capability_denied"


def test_a_tool_that_copes_with_an_upstream_failure_is_ok() -> None:
    assert call_error(returned(True, "{}", denials=[DENIAL], upstream_failures=[UPSTREAM])) is None


@pytest.mark.parametrize(
    ("end", "code"),
    [
        (failure(trap_text("interrupt")), "timeout"),
        (failure(trap_text("wasm `unreachable` instruction executed"), fuel_left=0), "fuel_exhausted"),
        (failure("invalid utf-8 sequence of 1 bytes from index 1"), "invalid_output"),
        (Ending(Limits(output_bytes=1024), guest_result=(True, "x" * 2048)), "output_too_large"),
    ],
)
def test_only_the_guests_own_failures_are_blamed_on_the_host(end: Ending, code: str) -> None:
    blamed = Ending(
        end.limits,
        exc=end.exc,
        fuel_left=end.fuel_left,
        guest_result=end.guest_result,
        denials=[DENIAL],
        upstream_failures=[UPSTREAM],
    )
    assert classify(blamed).code == code


@pytest.mark.parametrize("payload", ["{}", "x" * 2048, "é" * 600])
@pytest.mark.parametrize("timed_out", [False, True])
@pytest.mark.parametrize(
    "seen",
    [
        {},
        {"denials": [{"capability": "http", "reason": "no"}]},
        {"upstream_failures": [{"url": "https://x", "reason": "down"}]},
        {"approval": {"approval_id": "a1"}, "guest_reported_oom": True},
    ],
)
def test_an_ok_call_is_judged_alike_without_an_ending(payload: str, timed_out: bool, seen: dict[str, Any]) -> None:
    """``returned_error`` (the sandbox's quick judgement of a guest that returned ok) answers what
    ``call_error`` answers for the whole ending: what the host functions saw cannot change an ok call."""
    limits = Limits(output_bytes=1024, timeout_ms=250)
    whole = call_error(Ending(limits, guest_result=(True, payload), timed_out_in_host=timed_out, **seen))
    quick = returned_error((True, payload), limits, timed_out)
    assert (quick is None) == (whole is None)
    if quick is not None and whole is not None:
        assert (quick.code, quick.message, quick.details) == (whole.code, whole.message, whole.details)
