"""Unit tests of glovebox._traps.classify: one test per branch, with wasmtime's own texts.

The texts are copied from what wasmtime 50 produces for a component call (see
TOOLCHAINS.md); a few real traps from inline WAT make sure the synthetic ones
look like the real thing.
"""

from __future__ import annotations

import logging

import pytest
import wasmtime

from glovebox import Limits
from glovebox._traps import Failure, classify

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
) -> Failure:
    exc = wasmtime.WasmtimeError(text) if isinstance(text, str) else text
    return Failure(
        exc,
        limits,
        fuel_left,
        deadline_passed,
        instantiating=instantiating,
        guest_reported_oom=guest_reported_oom,
    )


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


def test_pool_exhaustion_is_a_retryable_internal_error() -> None:
    text = "maximum concurrent memory limit of 12000 reached for stores"
    error = classify(failure(text, instantiating=True))
    assert error.code == "internal_error"
    assert error.retryable is True
    assert "capacity" in error.message
    # Even when the store also reports no fuel (it never ran).
    assert classify(failure(text, fuel_left=0, instantiating=True)).code == "internal_error"


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
