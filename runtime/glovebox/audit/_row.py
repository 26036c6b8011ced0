"""What one call's audit row holds, decided here and nowhere else.

A row is built from the call's envelope (``CallResult``: its ``meta`` carries
the names, the digest, fuel, duration, what the host functions recorded and,
for a call the policy may retry, ``attempt`` and ``first_call_id``)
and the few facts the envelope does not carry: the input's digest, the policy
decision, the approval it used or was refused by (``egress.approval``: its id,
who decided and, for a denial, the reason given; inside the hash chain, and absent from calls without one, so
older rows verify unchanged), and whether the policy stores inputs and outputs. A run of code
mode has one row per attempt (:func:`run_row`). The values stored
are redacted (:func:`glovebox.audit._rowform.redact`); bounding, escaping and
chaining happen when the log appends the row.
"""

from __future__ import annotations

from typing import Any

from ..model._capability import Capability, registered
from ..model._result import CallResult
from ._rowform import redact

__all__ = ["RUN_TOOL", "bare_row", "call_row", "plain_params", "run_row"]

#: The ``tool`` of a run attempt's row (no registered tool can have this name: it holds a colon).
RUN_TOOL = "glovebox:run"

#: The counters of what the host functions dropped, kept in a row's ``egress``.
_DROPPED = ("denials_dropped", "egress_dropped", "upstream_failures_dropped", "sql_log_dropped", "records_dropped")


#: Entries of ``meta`` the row's ``egress`` keeps as they are: a remote tool's facts, the verdict of the
#: policy's output checks, warnings, secret-shaped values found (kind and path, never the value), the
#: tool a fallback stands in for, a nested call's run, and the counts of what the host functions dropped.
_FROM_META = frozenset({"remote", "evaluation", "warnings", "secret_scan", "routed_from", "run", *_DROPPED})
_parts: tuple[tuple[Capability, ...], tuple[str, ...], tuple[Capability, ...]] | None = None


def _egress_parts() -> tuple[tuple[str, ...], tuple[Capability, ...]]:
    """The registered capabilities split once: those whose record is ``meta[name]`` (the default
    ``Capability.egress``), by name, and those that make their own."""
    global _parts
    capabilities = registered()
    parts = _parts
    if parts is None or parts[0] is not capabilities:
        named = tuple(c.name for c in capabilities if type(c).egress is Capability.egress)
        own = tuple(c for c in capabilities if type(c).egress is not Capability.egress)
        parts = _parts = (capabilities, named, own)
    return parts[1], parts[2]


def plain_params(params: list[Any]) -> list[Any]:
    """Parameters as JSON values (a blob as ``{"base64": ...}``, a non-finite float as its text)."""
    import base64
    import math

    def plain(value: Any) -> Any:
        if isinstance(value, bytes):
            return {"base64": base64.b64encode(value).decode()}
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        return value

    return [plain(value) for value in params]


def call_row(
    result: CallResult,
    value: Any,
    *,
    input_digest: str | None = None,
    decision: str | None = None,
    approval: dict[str, Any] | None = None,
    store_inputs: bool = False,
    store_outputs: bool = False,
    sql_params: list[list[Any]] | None = None,
) -> dict[str, Any]:
    """The row of a call that ended with ``result`` on input ``value``.

    ``value`` is stored (redacted) only when ``store_inputs`` and the input had a
    digest (it was JSON); the output only when ``store_outputs`` and the call succeeded.
    The SQL statements the call sent (``meta.sql``: fingerprint, kind, tables,
    rows) go in ``egress.sql``; their parameters (``sql_params``) only with
    ``store_inputs``, redacted as inputs are.
    """
    meta = result.meta
    tool = meta["tool"] if meta.get("version") is None else f"{meta['tool']}@{meta['version']}"
    egress: dict[str, Any] = {"denials": meta.get("denials", [])}
    extras = {"sql": [redact(plain_params(params)) for params in sql_params or ()] if store_inputs else None}
    named, own = _egress_parts()
    for name in named:  # a capability whose record is meta's entry under its name
        record = meta.get(name)
        if record is not None:
            egress[name] = record
    for capability in own:  # one that makes its own record (http's from meta.egress, sql's with parameters)
        record = capability.egress(meta, store_inputs=store_inputs, extras=extras)
        if record is not None:
            egress[capability.name] = record
    for key in _FROM_META.intersection(meta):  # usually none: one set operation finds them
        if key == "warnings":  # what a check found but did not refuse (output validation under warn)
            warnings = meta["warnings"]  # a message may quote the output: kept only where outputs are
            egress["warnings"] = warnings if store_outputs else [_unquoted(warning) for warning in warnings]
        elif key not in _DROPPED or meta[key]:  # a count of what was dropped, only when some was
            egress[key] = meta[key]
    if approval is not None:
        egress["approval"] = approval
    row = {
        "call_id": meta["call_id"],
        "principal": meta["principal"],
        "tool": tool,
        "digest": meta.get("digest"),
        "input_digest": input_digest,
        "decision": decision,
        "outcome": "ok" if result.ok else result.code,
        "fuel_used": meta.get("fuel_used", 0),
        "duration_ms": meta.get("duration_ms", 0.0),
        "egress": egress,
        "input": redact(value) if store_inputs and input_digest else None,
        "output": redact(result.output) if store_outputs and result.ok else None,
    }
    if meta.get("attempt"):  # a call the policy may retry: which attempt, and the first one's call id
        row["attempt"], row["first_call_id"] = meta["attempt"], meta["first_call_id"]
    return row


def _unquoted(warning: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in warning.items() if key != "message"}


def bare_row(result: CallResult, *, input_digest: str | None = None, decision: str | None = None) -> dict[str, Any]:
    """The row of a call whose full row could not be written: the bare facts, marked as cut."""
    row = call_row(result, None, input_digest=input_digest, decision=decision)
    return {**row, "egress": {}, "input": None, "truncated": "all"}


def run_row(
    *,
    call_id: str,
    principal: str,
    outcome: str,
    run: dict[str, Any],
    program_digest: str,
    input_digest: str | None,
    value: Any,
    output: Any,
    duration_ms: float,
    fuel_used: int,
    attempt: int | None,
    first_call_id: str | None,
    store_inputs: bool = False,
    store_outputs: bool = False,
) -> dict[str, Any]:
    """The row of one attempt of a run (its first execution, or a resume), or of a start or resume
    refused before it made one.

    ``tool`` is :data:`RUN_TOOL`; ``digest`` the program's (``sha256:`` of its
    source), ``input_digest`` the run input's; ``outcome`` ``ok`` (the run is
    done), an error code (paused: ``approval_required``; failed or refused:
    its code) or ``cancelled``; ``egress.run`` the run's facts (``run_id``,
    ``attempt``, ``by``, ``status``, steps, the call ids of the attempts
    before); ``attempt`` and ``first_call_id`` (the columns a retried call
    uses) which attempt it is and the first attempt's call id. The run's
    input and output are stored as a call's are, when the policy says so.
    """
    row: dict[str, Any] = {
        "call_id": call_id,
        "principal": principal,
        "tool": RUN_TOOL,
        "digest": program_digest,
        "input_digest": input_digest,
        "decision": None,
        "outcome": outcome,
        "fuel_used": fuel_used,
        "duration_ms": duration_ms,
        "egress": {"denials": [], "run": run},
        "input": redact(value) if store_inputs and input_digest else None,
        "output": redact(output) if store_outputs and outcome == "ok" else None,
    }
    if attempt:
        row["attempt"], row["first_call_id"] = attempt, first_call_id
    return row
