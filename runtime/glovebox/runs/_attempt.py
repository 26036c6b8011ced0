"""One attempt of a run as its audit row tells it, and how it ended.

**Accountability.** Each attempt (the first execution, and each resume) has an
audit call id of its own, and ends by handing a :class:`RunAttempt` to its
environment's ``audit_attempt`` (the Runtime writes it as the attempt's audit
row); every nested call of the attempt carries that call id as
``parent_call_id`` in its own row's ``egress.run``. One row per attempt, not per
run: an attempt is what someone started or resumed, so each row says who
(``by``), how it ended, and what it cost, and a resume by an operator is never
folded into the row of the run's owner.

An attempt that never ends (its process killed by SIGKILL, or stalled past its
lease) cannot write its row: the resume that claims the run from it writes it,
under its call id, with outcome :data:`ABANDONED` (:func:`abandoned_attempt`);
the stalled attempt, finding its run claimed, writes none, so every attempt has
exactly one row. A cancel writes a row of its own (``action`` ``cancel``, ``by``
the canceller), and the dead attempt's too when its holder was a process of
this host that is gone; a cancel of a finished run changes nothing and writes none.

**How an attempt ended** (:func:`ending`), decided in this order:

1. a nested call answered ``approval_required``: ``paused`` (the error names the approval);
2. the program diverged from its journal or reached a bound: ``failed`` with
   ``run_diverged`` or ``run_limit``;
3. the runner failed (the program looped, hoarded memory, threw):
   ``failed`` with the sandbox's code (``fuel_exhausted``, ``memory_limit``,
   ``timeout``, ``guest_error``, ``invalid_output``);
4. the program let a nested call's ``ToolCallError`` escape: ``failed`` with that
   call's code and message;
5. else ``done`` with the program's value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core._errors import CallError, InvalidOutput, call_error
from ..core._jsonlimits import JsonRejected
from ..core._jsonlimits import loads as loads_json
from ._host import RunHost
from ._records import RunRecord

__all__ = ["ABANDONED", "RunAttempt", "abandoned_attempt", "ending"]

#: The outcome (and ``egress.run.action``) of the row written for an attempt that never wrote its own.
ABANDONED = "abandoned"


@dataclass(frozen=True)
class RunAttempt:
    """One attempt of a run (or a start or resume refused before it made one), as its audit row tells it.

    Attributes:
        call_id: the attempt's own audit call id (its nested calls' ``parent_call_id``).
        run_id: the run's id; None for a run refused before it existed (a quota).
        principal: the run's owner (every nested call is this principal's).
        by: who started or resumed it (the owner, or an operator who resumed it).
        attempt: 1 for the first execution, 2... for each resume; None when refused before one.
        first_call_id: the first attempt's call id.
        previous_call_id: the call id of the attempt before this one (one that died has a row written by the
            resume that took the run over from it: ``abandoned``).
        status: the run's status after it: ``done``, ``paused``, ``failed``, ``cancelled`` or ``running``.
        outcome: the row's outcome: ``ok`` (done), the error's code (paused, failed, refused),
            ``cancelled`` (the run was cancelled while this attempt ran, or the cancel's own row),
            or :data:`ABANDONED`.
        error: why it did not finish, when it did not.
        action: None for an attempt (or a refused start or resume); ``cancel`` for the row of a
            cancel (``by`` is who cancelled); ``abandoned`` for the row another attempt writes for
            one whose process died, or stalled past its lease, before it could write its own
            (``taken_over_by`` names the attempt that took the run over).
    """

    call_id: str
    run_id: str | None
    principal: str
    by: str
    attempt: int | None
    first_call_id: str | None
    previous_call_id: str | None
    status: str
    outcome: str
    error: CallError | None
    source: str
    input: Any
    output: Any = None
    duration_ms: float = 0.0
    fuel_used: int = 0
    steps: int = 0
    replayed: int = 0
    calls: int = 0
    holder: str | None = None
    action: str | None = None
    taken_over_by: str | None = None


def abandoned_attempt(seen: RunRecord, taken_over_by: str) -> RunAttempt:
    """The row of the latest attempt of ``seen`` (the run as it stood before a resume claimed it, or a
    cancel ended it): it never ended, so it never wrote one (``taken_over_by``: the claim's or cancel's call id)."""
    assert seen.attempt_call_id is not None
    by = seen.resumed_by if seen.attempts > 1 and seen.resumed_by else seen.principal
    first = seen.first_call_id or seen.attempt_call_id
    return RunAttempt(
        seen.attempt_call_id, seen.run_id, seen.principal, by, seen.attempts, first, None,
        "running", ABANDONED, None, seen.source, seen.input, steps=seen.steps,
        holder=seen.lease_owner, action=ABANDONED, taken_over_by=taken_over_by,
    )  # fmt: skip


def ending(host: RunHost, text: str | None, failed: CallError | None) -> tuple[str, Any, CallError | None]:
    """How an attempt ended (the order of the module docstring): its status, output and error."""
    if host.paused is not None:
        assert host.paused.error is not None
        return "paused", None, host.paused.error
    if host.stopped is not None:
        return "failed", None, host.stopped
    if failed is not None:
        return "failed", None, failed
    try:
        answer = loads_json(text or "")
    except JsonRejected as exc:  # what the program returned cannot be JSON (a function, a BigInt)
        excerpt = (text or "")[:200]
        return "failed", None, InvalidOutput(f"the program's output {exc}: {excerpt}")
    if isinstance(answer, dict) and "error" in answer:
        error = answer["error"]
        return (
            "failed",
            None,
            call_error(error["code"], error["message"], error.get("details") or {}, error["retryable"]),
        )
    if not isinstance(answer, dict) or "output" not in answer:  # the program changed how JSON encodes it
        return "failed", None, InvalidOutput(f"the program's output cannot be read: {(text or '')[:200]}")
    return "done", answer["output"], None
