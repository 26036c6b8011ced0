"""How a call ended, decided in one place: :func:`call_error`.

Everything the host knows when an invocation ends is gathered in an
:class:`Ending` — the wasmtime exception if there was one, what the store knows
(fuel left, the deadline passed, whether it was still instantiating), what the
host functions saw (a host call that ran out of time, an out-of-memory report,
refused capabilities, failed upstream requests) and the guest's own ``ok`` /
``err`` payload — and :func:`call_error` turns it into the one
:class:`~glovebox.CallError` the caller gets, or None.

The order of precedence:

1. A wasmtime failure (the only place wasmtime errors are translated).
   wasmtime reports a failing component call in three hierarchies: ``Trap``
   (with a trap code), ``WasmtimeError`` (a trap inside a component call
   arrives as one, with the reason only in its text) and ``ExitTrap`` (a WASI
   exit). What the store knows — fuel left, the deadline passed — is trusted
   first; the error text is read only as the last resort, and only here.
   Otherwise the guest's ``err`` payload is a ``guest_error``, and an ``ok``
   payload over ``limits.output_bytes`` is ``output_too_large``.
2. A host call that ran out of the call's time (epochs do not fire in host
   calls) makes the call a ``timeout``, whatever the guest did next.
3. A tool that failed (``guest_error`` or ``guest_trap``) after a SQL
   statement of a ``require_approval`` kind filed an approval request failed
   for want of it: ``approval_required``, naming the request; else, after the
   host refused it a capability, because of the refusal:
   ``capability_denied``; else, after a granted upstream request failed
   (connection, TLS, name resolution, a per-request timeout, or a 5xx
   answer): ``upstream_error``, retryable (``circuit_open`` when the host held a
   request back because its host's circuit breaker is open). The tool's own words stay in
   ``details.guest_message``. A tool that copes and returns ``ok`` is ``ok``.

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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import wasmtime

from ..core._errors import (
    ApprovalRequired,
    CallError,
    CallTimeout,
    CapabilityDenied,
    CircuitOpen,
    FuelExhausted,
    GuestError,
    GuestTrap,
    InternalError,
    InvalidOutput,
    MemoryLimit,
    OutputTooLarge,
    Overloaded,
    UpstreamError,
)
from ..core._world import WRONG_TYPES
from ..model._grantrules import sql_kind_phrase
from ..model._manifest import Limits

__all__ = ["MAX_ERROR_MESSAGE_CHARS", "POOL_RETRY_AFTER_MS", "Ending", "call_error", "returned_error"]

logger = logging.getLogger("glovebox")

MAX_ERROR_MESSAGE_CHARS = 4096
#: What a call refused for want of an instance slot is told to wait: about one short call.
POOL_RETRY_AFTER_MS = 50

_MEMORY_FAULT = re.compile(r"memory fault at wasm address 0x([0-9a-f]+) in linear memory of size 0x([0-9a-f]+)")
_TRAP_REASON = re.compile(r"wasm trap: (.+)")
_LIFT_ERRORS = (
    "invalid utf-8",
    "out of bounds of memory",
    "invalid variant discriminant",
    "invalid discriminant",
    "out of range [",  # a variant's or enum's discriminant past its cases
    "out of range for `char`",  # a surrogate or a value past U+10FFFF for a char
    "unexpected end of",
    "realloc return",
    "pointer not aligned",
)
_INSTANTIATE_MEMORY = ("exceeds memory limits", "memory minimum size", "memory index", "resource limit exceeded")
_GUEST_FAILURES = ("guest_error", "guest_trap")


@dataclass(frozen=True)
class Ending:
    """Everything the host knows when one invocation ends.

    Attributes:
        limits: the call's effective limits.
        exc: the wasmtime exception that ended the call, if any.
        fuel_left: the store's fuel when it ended (None: unknown).
        deadline_passed: the wall-clock deadline had passed.
        instantiating: the failure came before ``call`` ran.
        guest_reported_oom: the guest logged ``OOM_MARKER`` before it trapped.
        timed_out_in_host: a host function ran out of the call's time.
        denials: capability requests the host refused.
        upstream_failures: granted upstream requests that failed.
        guest_result: the guest's ``(is_ok, payload)`` when ``call`` returned.
        approval: the approval request a SQL statement filed, if one did.
    """

    limits: Limits
    exc: BaseException | None = None
    fuel_left: int | None = None
    deadline_passed: bool = False
    instantiating: bool = False
    guest_reported_oom: bool = False
    timed_out_in_host: bool = False
    denials: Sequence[dict[str, Any]] = ()
    upstream_failures: Sequence[dict[str, Any]] = ()
    guest_result: tuple[bool, str] | None = None
    approval: dict[str, Any] | None = None


def call_error(end: Ending) -> CallError | None:
    """The error a call that ended like ``end`` reports, or None when it succeeded."""
    if end.exc is not None:
        error: CallError | None = _wasmtime_error(end.exc, end)
    elif end.guest_result is None:
        error = InternalError("the call ended without a result")
    else:
        error = _guest_error(*end.guest_result, end.limits)
    if end.timed_out_in_host and (error is None or error.code != "timeout"):
        error = CallTimeout(
            f"the tool did not finish within its {end.limits.timeout_ms} ms deadline (waiting on the network)",
            details={"timeout_ms": end.limits.timeout_ms},
        )
    if error is not None and error.code in _GUEST_FAILURES:
        return _blame(error, end)
    return error


def returned_error(result: tuple[bool, str], limits: Limits, timed_out_in_host: bool) -> CallError | None:
    """:func:`call_error` of a call that raised nothing and whose guest returned ``ok``: the same
    answer (``output_too_large``, ``timeout`` or None) without gathering an :class:`Ending`.

    Only a failed guest is blamed on a refusal or an upstream failure, so nothing else of the
    ending can change an ``ok`` call's answer.
    """
    if timed_out_in_host:
        return call_error(Ending(limits, guest_result=result, timed_out_in_host=True))
    return _guest_error(True, result[1], limits)


# -- the guest's own result ---------------------------------------------------------------------


def _guest_error(is_ok: bool, payload: str, limits: Limits) -> CallError | None:
    if not is_ok:
        message = payload
        if len(message) > MAX_ERROR_MESSAGE_CHARS:
            message = message[:MAX_ERROR_MESSAGE_CHARS] + " …(truncated)"
        return GuestError(message or "the tool reported an error without a message")
    size = len(payload.encode("utf-8", "surrogatepass"))
    if size > limits.output_bytes:
        return OutputTooLarge(
            f"the tool's output is {size} bytes, over its {limits.output_bytes}-byte limit",
            details={"output_bytes": size, "limit": limits.output_bytes},
        )
    return None


# -- what the host functions saw ----------------------------------------------------------------


def _blame(error: CallError, end: Ending) -> CallError:
    """A tool that failed after a refusal or an upstream failure failed because of it.

    The caller learns what to ask for (``capability_denied``, naming the
    request and why it was refused) or that trying again may help
    (``upstream_error``), instead of only the tool's own complaint, which
    stays in ``details.guest_message``.
    """
    guest = {"guest_code": error.code, "guest_message": error.message}
    if end.approval is not None:
        request = end.approval
        return ApprovalRequired(
            f"{sql_kind_phrase(request['kind'])} on the database {request['database']!r} needs approval: ask a "
            "principal with the approver scope to run "
            f"`glovebox --policy POLICY approve {request['approval_id']} --principal APPROVER`, then call again",
            details={**request, **guest},
        )
    if end.denials:
        denials = list(end.denials)
        first = denials[0]
        return CapabilityDenied(_denied_message(first), details={"denials": denials, **guest})
    if end.upstream_failures:
        failures = list(end.upstream_failures)
        circuit = next((f for f in failures if "circuit_open_ms" in f), None)
        if circuit is not None:
            return _circuit_open(circuit, failures, guest)
        first = failures[0]
        return UpstreamError(
            f"the tool failed after an upstream request failed "
            f"({first.get('method', '')} {first.get('url', '')}): {first.get('reason', 'failed')}",
            details={"upstream_failures": failures, **guest},
        )
    return error


def _denied_message(first: dict[str, Any]) -> str:
    if first.get("capability") == "sql":
        named = next((f", {key} {first[key]!r}" for key in ("table", "column", "function") if key in first), "")
        about = f"a statement (kind {first.get('kind', 'unknown')}{named})"
        return (
            f"the tool failed after the host refused {about} on the database "
            f"{first.get('database', '')!r}: {first.get('reason', 'denied')}"
        )
    if "url" in first:
        what = f"{first.get('method', '')} {first['url']}"
    else:  # another capability's request: its own fields name it
        what = ", ".join(f"{key} {value!r}" for key, value in first.items() if key not in ("capability", "reason"))
    return (
        f"the tool failed after the host refused {first.get('capability', 'a capability')} access "
        f"({what}): {first.get('reason', 'denied')}"
    )


def _circuit_open(circuit: dict[str, Any], failures: list[dict[str, Any]], guest: dict[str, Any]) -> CallError:
    """A tool that failed after the host held a request back because its host's breaker is open."""
    host = circuit.get("host") or urlsplit(str(circuit.get("url", ""))).hostname or ""
    return CircuitOpen(
        f"the tool failed after the host held back a request ({circuit.get('method', '')} {circuit.get('url', '')}):"
        f" {circuit.get('reason', 'circuit open')}",
        details={
            "scope": "host",
            "host": host,
            "retry_after_ms": circuit["circuit_open_ms"],
            "upstream_failures": failures,
            **guest,
        },
    )


# -- wasmtime -----------------------------------------------------------------------------------


def _wasmtime_error(exc: BaseException, end: Ending) -> CallError:
    """Map a wasmtime exception to the stable error it stands for."""
    limits, text = end.limits, str(exc)
    if isinstance(exc, wasmtime.ExitTrap):
        return GuestTrap(f"the tool exited with status {exc.code}", details={"exit_status": exc.code})
    if "maximum concurrent" in text or "concurrent limit" in text:
        return Overloaded(
            "the host's instance pool is full; retry shortly",
            details={"retry_after_ms": POOL_RETRY_AFTER_MS, "reason": "instance pool full"},
        )
    if end.fuel_left == 0 or "all fuel consumed" in text:
        return FuelExhausted(
            f"the tool used all of its fuel ({limits.fuel} units): it may loop, or the input may be too large",
            details={"fuel": limits.fuel},
        )
    if end.deadline_passed or _trap_reason(text) == "interrupt":
        return CallTimeout(
            f"the tool did not finish within its {limits.timeout_ms} ms deadline",
            details={"timeout_ms": limits.timeout_ms},
        )
    if _HOSTCALL_BUDGET in text:
        return GuestTrap(
            "the tool passed a host call more data than the host copies in one call "
            "(e.g. an HTTP request body of many megabytes); send less per call",
            details={"trap": "host call arguments over the copy budget"},
        )
    if WRONG_TYPES in text:
        return GuestTrap(
            "the tool imports a host function with other types than the glovebox world's; "
            "build it against the world shipped with glovebox",
            details={"trap": "host function imported with other types"},
        )
    memory = _memory_error(text, limits, end.instantiating, end.guest_reported_oom)
    if memory is not None:
        return memory
    if any(marker in text for marker in _LIFT_ERRORS) and not end.instantiating:
        reason = _last_line(text)
        return InvalidOutput(f"the tool returned a malformed result: {reason}", details={"reason": reason})
    trap = _trap_reason(text)
    if isinstance(exc, wasmtime.Trap) or trap is not None:
        trap = trap or _last_line(text)
        return GuestTrap(f"the tool crashed: {trap}", details={"trap": trap})
    logger.error("unclassified wasmtime error: %s", text)
    return InternalError()


#: wasmtime's words when a host call's arguments exceed what it copies out of a guest in one call.
_HOSTCALL_BUDGET = "fuel allocated for hostcalls has been exhausted"


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
