"""What the run store holds, as Python values: a run, a lease on it, a journal step.

Statuses: ``running`` (or a process died while it was), ``paused`` (waiting for
an approval), ``done``, ``failed``, ``cancelled``; the last three are
:data:`FINISHED`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["COLUMNS", "FINISHED", "JournalStep", "Lease", "RecordedStep", "RunRecord", "record_of"]

FINISHED = ("done", "failed", "cancelled")


@dataclass(frozen=True)
class Lease:
    """Who executes a run (``owner``: host, pid and a random id) and for how long without renewing."""

    owner: str
    seconds: float


@dataclass
class RunRecord:
    """One run as the store holds it.

    ``lease_owner`` and ``lease_expires`` (epoch seconds) name the attempt
    executing it (None once it ended); ``resumed_by`` who made the latest
    resume (None before the first); ``attempt_call_id`` and ``first_call_id``
    the audit call ids of its latest and first attempts.
    """

    run_id: str
    principal: str
    status: str
    lang: str
    source: str
    script: str
    input: Any
    result: dict[str, Any] | None
    created: float
    updated: float
    attempts: int
    steps: int
    journal_bytes: int
    lease_owner: str | None = None
    lease_expires: float | None = None
    resumed_by: str | None = None
    attempt_call_id: str | None = None
    first_call_id: str | None = None

    def leased(self, now: float | None = None) -> bool:
        """Whether an attempt holds a live lease on the run (it is executing somewhere now)."""
        expires = self.lease_expires
        return self.lease_owner is not None and expires is not None and expires >= (now or time.time())

    def summary(self) -> dict[str, Any]:
        """What ``runs list`` shows of it."""
        return {
            "run_id": self.run_id,
            "principal": self.principal,
            "status": self.status,
            "lang": self.lang,
            "steps": self.steps,
            "journal_bytes": self.journal_bytes,
            "attempts": self.attempts,
            "resumed_by": self.resumed_by,
            "created": self.created,
            "updated": self.updated,
        }


#: The columns of ``runs`` that :func:`record_of` reads, in its order.
COLUMNS = (
    "run_id, principal, status, lang, source, script, input, result, created, updated, attempts, steps, journal_bytes,"
    " lease_owner, lease_expires, resumed_by, attempt_call_id, first_call_id"
)


def record_of(row: tuple[Any, ...]) -> RunRecord:
    """The run of one row of ``SELECT {COLUMNS} FROM runs``."""
    run_id, principal, status, lang, source, script, input_text, result, created, updated, attempts, steps, size = row[
        :13
    ]
    owner, expires, resumed_by, attempt_call_id, first_call_id = row[13:]
    return RunRecord(
        run_id=run_id,
        principal=principal,
        status=status,
        lang=lang,
        source=source,
        script=script,
        input=json.loads(input_text),
        result=None if result is None else json.loads(result),
        created=created,
        updated=updated,
        attempts=attempts,
        steps=steps,
        journal_bytes=size,
        lease_owner=owner,
        lease_expires=expires,
        resumed_by=resumed_by,
        attempt_call_id=attempt_call_id,
        first_call_id=first_call_id,
    )


@dataclass
class JournalStep:
    """One host call of a run."""

    seq: int
    kind: str
    request: Any
    result: Any
    state: str
    call_id: str | None = None
    reran: bool = False
    started: float = 0.0
    finished: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The step as ``runs show`` prints it."""
        return {
            "seq": self.seq,
            "kind": self.kind,
            "request": self.request,
            "result": self.result,
            "state": self.state,
            "call_id": self.call_id,
            "reran": self.reran,
        }


@dataclass(slots=True)
class RecordedStep:
    """One step of a journal as a replay reads it: its request and result as the texts stored."""

    seq: int
    kind: str
    #: ``{"kind": ..., **request}`` with sorted keys, as ``RunHost`` compares requests.
    request_text: str
    result_text: str | None
    state: str
    #: The request as the program sent it (None in a step written before this column).
    asked: str | None = None
    #: What the program was sent: a tool call's output or error, else ``result_text`` itself (None then).
    answer: str | None = None
    #: A tool call's summary (``RunResult.calls``) as it reads on a replay.
    summary: str | None = None
    #: The characters the step holds, all its texts together (what the journal's bound counts).
    size: int = 0
