"""``Execute``: the last step: the tool's executor runs it; its output is decoded and held to its schema.

How a mismatch with the output schema ends depends on the tool's output
validation (the policy's ``guards[].output_validation``, else the manifest's,
else ``warn`` for an imported API operation and ``enforce`` for every other
tool): ``enforce`` refuses it as ``invalid_output``, ``warn`` answers the output
with the mismatch in ``meta.warnings`` (and so in the audit row), ``off`` skips
the check. A refusal never hides a write that happened: when the call changed
something upstream (see :func:`committed`), ``invalid_output`` and
``evaluation_failed`` say so in ``details.effects: "committed"``.
"""

from __future__ import annotations

from typing import Any

from ...core._errors import CallError, InvalidOutput
from ...core._jsonlimits import JsonRejected, escape_surrogates
from ...core._jsonlimits import loads as loads_json
from ...model._result import CallResult, succeeded
from ...telemetry._tracing import step
from .._call import Call, CallState
from ..executors._base import Executors
from ._validate import SchemaCache

__all__ = ["Execute", "committed", "warn"]

#: HTTP methods that read (RFC 9110's safe methods): a request with another method may have written.
_READS = frozenset({"GET", "HEAD", "OPTIONS"})
_WRITES = frozenset({"insert", "update", "delete", "ddl", "other"})
#: Warnings kept in ``meta.warnings`` per call.
MAX_WARNINGS = 16
#: The longest warning message kept (characters; a schema's message may quote the output).
MAX_MESSAGE = 1000


class Execute:
    """The end of the chain: picks the executor of the tool's kind and answers its decoded output."""

    __slots__ = ("_executors", "_schemas")

    def __init__(self, executors: Executors, schemas: SchemaCache) -> None:
        self._executors = executors
        self._schemas = schemas

    def __call__(self, call: Call) -> CallResult:
        state = call.state
        assert state is not None and state.info is not None
        info = state.info
        text = state.output_text = self._executors.for_kind(info.kind).execute(call)
        try:
            output = loads_json(text)
        except JsonRejected as exc:
            details = {**exc.details, "excerpt": escape_surrogates(text[:200])}
            raise _told(InvalidOutput(f"the tool's output {exc}", details=details), state) from exc
        if info.output_schema is not True:
            guards = state.decision.guards if state.decision is not None else None
            mode = (guards.output_validation if guards is not None else None) or info.manifest.output_validation_mode()
            if mode != "off":
                try:
                    if call.tracer is None:
                        self._schemas.get(info, "output").validate(output)
                    else:
                        with step(call.tracer, "glovebox.validate", "output"):
                            self._schemas.get(info, "output").validate(output)
                except InvalidOutput as exc:
                    if mode == "enforce":
                        raise _told(exc, state) from None
                    warn(state.meta, exc)
        return succeeded(output, state.meta)


def warn(meta: dict[str, Any], error: CallError) -> None:
    """Put ``error`` into ``meta.warnings`` (``code``, ``message``, ``details``) instead of failing the call."""
    warnings = meta.setdefault("warnings", [])
    if len(warnings) < MAX_WARNINGS:
        message = error.message if len(error.message) <= MAX_MESSAGE else error.message[: MAX_MESSAGE - 1] + "…"
        warnings.append({"code": error.code, "message": message, "details": dict(error.details)})


def committed(state: CallState) -> bool:
    """Whether this attempt changed something upstream: a tool that is not idempotent whose HTTP request
    with a method other than GET, HEAD or OPTIONS got an answer below 400, or whose write statement ran."""
    decision = state.decision
    if decision is not None and decision.guards.idempotent:
        return False
    meta = state.meta
    for entry in meta.get("egress", ()):
        if str(entry.get("method", "GET")).upper() not in _READS and 0 < int(entry.get("status") or 0) < 400:
            return True
    for entry in meta.get("sql", ()):
        if entry.get("kind") in _WRITES and entry.get("decision") in ("allow", "approved") and "error" not in entry:
            return True
    return False


def _told(error: CallError, state: CallState) -> CallError:
    """``error``, saying in ``details.effects`` that the call's write happened, when it did."""
    if committed(state):
        error.details["effects"] = "committed"
    return error
