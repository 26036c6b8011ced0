"""Translate wasmtime failures into glovebox call errors — the one place that does.

wasmtime reports a failing component call in three hierarchies: ``Trap`` (with a
trap code), ``WasmtimeError`` (a trap inside a component call arrives as one,
with the reason only in its text) and ``ExitTrap`` (a WASI exit). What the
store knows — fuel left, the deadline passed — is trusted first; the error
text is read only as the last resort, and only here.

A refused ``memory.grow`` is not a trap: it returns -1 and the guest decides
what to do. The call is reported as ``memory_limit`` when the guest then
traps after saying so (the C SDK logs ``OOM_MARKER`` and traps when an
allocation it cannot do without fails), when instantiation needs more memory
than the cap, or when a memory fault is reported at the end of a memory that
has grown to within one step of the cap. A guest that handles the failure
itself returns its own ``guest_error``.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import wasmtime

from ._errors import (
    CallError,
    CallTimeout,
    FuelExhausted,
    GuestTrap,
    InternalError,
    InvalidOutput,
    MemoryLimit,
)
from ._manifest import Limits

__all__ = ["Failure", "classify"]

logger = logging.getLogger("glovebox")

_MEMORY_FAULT = re.compile(r"memory fault at wasm address 0x([0-9a-f]+) in linear memory of size 0x([0-9a-f]+)")
_TRAP_REASON = re.compile(r"wasm trap: (.+)")
_LIFT_ERRORS = (
    "invalid utf-8",
    "out of bounds of memory",
    "invalid variant discriminant",
    "invalid discriminant",
    "unexpected end of",
    "realloc return",
    "pointer not aligned",
)
_INSTANTIATE_MEMORY = ("exceeds memory limits", "memory minimum size", "memory index", "resource limit exceeded")


@dataclass(frozen=True)
class Failure:
    """What the host knew when a call failed."""

    exc: BaseException
    limits: Limits
    fuel_left: int | None
    deadline_passed: bool
    instantiating: bool = False
    guest_reported_oom: bool = False


def classify(failure: Failure) -> CallError:
    """Map a wasmtime exception to the stable error it stands for."""
    exc, limits = failure.exc, failure.limits
    text = str(exc)
    if isinstance(exc, wasmtime.ExitTrap):
        return GuestTrap(f"the tool exited with status {exc.code}", details={"exit_status": exc.code})
    if "maximum concurrent" in text or "concurrent limit" in text:
        return InternalError("the host is at its instance capacity; retry shortly", retryable=True)
    if failure.fuel_left == 0 or "all fuel consumed" in text:
        return FuelExhausted(
            f"the tool used all of its fuel ({limits.fuel} units): it may loop, or the input may be too large",
            details={"fuel": limits.fuel},
        )
    if failure.deadline_passed or _trap_reason(text) == "interrupt":
        return CallTimeout(
            f"the tool did not finish within its {limits.timeout_ms} ms deadline",
            details={"timeout_ms": limits.timeout_ms},
        )
    memory = _memory_error(text, limits, failure.instantiating, failure.guest_reported_oom)
    if memory is not None:
        return memory
    if any(marker in text for marker in _LIFT_ERRORS) and not failure.instantiating:
        reason = _last_line(text)
        return InvalidOutput(f"the tool returned a malformed result: {reason}", details={"reason": reason})
    trap = _trap_reason(text)
    if isinstance(exc, wasmtime.Trap) or trap is not None:
        trap = trap or _last_line(text)
        return GuestTrap(f"the tool crashed: {trap}", details={"trap": trap})
    logger.error("unclassified wasmtime error: %s", text)
    return InternalError()


def _trap_reason(text: str) -> str | None:
    found = _TRAP_REASON.findall(text)
    return found[-1].strip() if found else None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return re.sub(r"^\d+: ", "", lines[-1]) if lines else text


def _memory_error(text: str, limits: Limits, instantiating: bool, reported: bool) -> MemoryLimit | None:
    cap = limits.memory_bytes
    message = f"the tool needed more than its {cap} bytes of memory"
    details = {"memory_bytes": cap}
    if instantiating and any(marker in text for marker in _INSTANTIATE_MEMORY):
        return MemoryLimit(message + " to start", details=details)
    if reported and _trap_reason(text) is not None:
        # The SDK logs OOM_MARKER when an allocation is refused, then traps.
        return MemoryLimit(message, details=details)
    fault = _MEMORY_FAULT.search(text)
    if fault is None:
        return None
    address, size = int(fault.group(1), 16), int(fault.group(2), 16)
    # A fault at or past the end of a memory that has grown to within one
    # growth step of the cap is what exhaustion looks like: the grow was
    # refused and the guest touched the memory it did not get.
    slack = max(1024 * 1024, cap // 8)
    if address >= size and size + slack >= cap:
        return MemoryLimit(message, details={**details, "memory_size": size})
    return None
