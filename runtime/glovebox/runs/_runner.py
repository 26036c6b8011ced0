"""Runs: start one, resume one, cancel one; each attempt is one invocation of the code runner.

An attempt re-executes the program from the start in a fresh sandbox of the
code runner (``guest/js/runner.js``, :mod:`._component`) under the run's own
limits (fuel, memory, and a wall-clock deadline that nested calls count
against), with a :class:`~glovebox.runs._host.RunHost` answering its host
calls. How it ended, and the audit row each attempt leaves, are
:mod:`._attempt`'s. Everything the runner needs from outside (the sandbox, the
nested calls, the visible tools, the audit log, the policy's lease length) is
one :class:`~glovebox.runs._env.RunEnvironment`.

**The deadline.** An attempt's wall-clock deadline (``limits.timeout_ms``)
bounds its nested calls too: each carries it in its run context
(``deadline_at``, epoch seconds, across a ProcessPool's wire and a Ray call),
and a call still running when it passes is cut short with ``timeout``, so the
run ends by its deadline, not by its slowest tool's.

**The lease.** An attempt holds the run's lease (:mod:`._leases`, :mod:`._claims`)
from its claim to its end, renewed by the runner's lease thread every third of
its length; its journal writes are fenced by it. A resume that finds a live
lease does nothing and answers ``status: running`` with
:class:`~glovebox.RunBusy` naming the holder.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, cast

from wasmtime.component import Component

from ..core._errors import CallError, InvalidInput, JournalTampered, ProgramChanged, RunBusy, call_error
from ..core._jsonlimits import JsonRejected, check_value
from ..model._manifest import MIB, Limits
from ..model._result import CallResult
from ._attempt import RunAttempt, abandoned_attempt, ending
from ._component import RunnerComponent
from ._env import RunEnvironment
from ._host import CallTool, RunBounds, RunHost
from ._leases import Heartbeats, LeasedStore, dead_holder, gone, new_lease
from ._records import FINISHED, Lease, RunRecord
from ._result import RunResult
from ._store import RunStore
from ._tools import ProgramTools

__all__ = ["RUN_LIMITS", "Runner"]

logger = logging.getLogger("glovebox.runs")

#: The program's own limits (its nested calls have theirs): ~2 s of interpreted JavaScript,
#: 64 MiB, and one minute of wall clock for the whole run, nested calls included.
RUN_LIMITS = Limits(fuel=20_000_000_000, memory_bytes=64 * MIB, timeout_ms=60_000, output_bytes=1 * MIB)


class Runner:
    """Starts, resumes and cancels the runs of one home, in ``env``."""

    def __init__(
        self, store: RunStore, env: RunEnvironment, *, limits: Limits = RUN_LIMITS, bounds: RunBounds | None = None
    ) -> None:
        self.store = store
        self._env = env
        #: What the programs see of the tools (their names, a search, a nested call).
        self.tools = ProgramTools(env)
        self._component: Callable[[str], Component] = RunnerComponent(lambda: env.sandbox.shared)
        self._heartbeats = Heartbeats(store)
        self.limits = limits
        self.bounds = bounds or RunBounds()

    def start(self, script: str, *, lang: str, source: str, input: Any, principal: str) -> RunResult:
        """Record a new run and make its first attempt."""
        try:
            check_value(input)
        except JsonRejected as exc:
            raise InvalidInput(f"the run's input breaks the JSON rules: {exc}") from exc
        component = self._component(lang)  # (built on first use: before the run exists, its lease or deadline)
        lease, call_id = self._lease(), uuid.uuid4().hex
        run_id = self.store.create(principal, lang, source, script, input, lease=lease, call_id=call_id)
        record = self.store.get(run_id)
        assert record is not None
        return self._attempt(record, component, lease, call_id, by=principal, previous=None)

    def refuse(self, principal: str, error: CallError, *, source: str, input: Any) -> RunResult:
        """A run refused before it existed (a quota): ``failed`` with ``error``, and its audit row."""
        call_id = uuid.uuid4().hex
        facts = (None, None, None, "failed", error.code, error, source, input)
        self._env.audit_attempt(RunAttempt(call_id, None, principal, principal, *facts))
        return RunResult(run_id="", status="failed", error=error, meta={"principal": principal, "call_id": call_id})

    def resume(self, run_id: str, *, by: str | None = None) -> RunResult:
        """Make another attempt at a paused run, or one whose process died (``running``), as ``by``
        (recorded in the run and in the attempt's audit row; default: the run's own principal).

        A finished run is answered as it ended, without running anything. A run
        another attempt holds a live lease on answers ``status: running`` with
        ``run_busy`` naming the holder, and nothing runs.

        Raises:
            ValueError: there is no run ``run_id``.
        """
        record = self._get(run_id)
        if record.status in FINISHED:
            return self.result_of(record)
        who = by or record.principal
        component = self._component(record.lang)  # (built on first use: before the claim starts the lease's clock)
        lease, call_id = self._lease(), uuid.uuid4().hex
        claimed = self.store.claim(run_id, ("paused", "running"), lease=lease, by=who, call_id=call_id)
        if claimed is None and (dead := dead_holder(seen := self._get(run_id))) is not None:
            record = seen
            claimed = self.store.claim(run_id, ("paused", "running"), lease=lease, by=who, call_id=call_id, dead=dead)
        if claimed is None:
            current = self._get(run_id)
            if current.status not in FINISHED and current.leased():
                return self._busy(current, who, call_id)
            return self.result_of(current)  # finished meanwhile
        if record.status == "running":  # its last attempt never ended: it died, or stalled past its lease
            self._abandoned(record, claimed, call_id)
        try:  # held now, so no attempt writes meanwhile: the program and journal are what the run wrote
            self.store.check(run_id)
        except (ProgramChanged, JournalTampered) as refused:
            return self._tampered(claimed, who, refused, lease.owner, call_id)
        return self._attempt(claimed, component, lease, call_id, by=who, previous=record.attempt_call_id)

    def _tampered(self, record: RunRecord, by: str, refused: CallError, owner: str, call_id: str) -> RunResult:
        """The attempt of a resume that found the stored run is not what it wrote (``record``: as claimed):
        the run ends ``failed`` with ``refused`` (it never runs again), and the attempt has its audit row.
        Nothing ran."""
        meta = {"principal": record.principal, "attempts": record.attempts, "call_id": call_id, "resumed_by": by}
        result = RunResult(record.run_id, "failed", None, refused, [], meta)
        self.store.set_status(record.run_id, "failed", result.to_dict(), only_from="running", owner=owner)
        self._env.audit_attempt(
            RunAttempt(
                call_id, record.run_id, record.principal, by, record.attempts, record.first_call_id or call_id,
                None, "failed", refused.code, refused, record.source, record.input,
            )
        )  # fmt: skip
        return result

    def _abandoned(self, seen: RunRecord, claimed: RunRecord, call_id: str) -> None:
        """Write the row of the attempt this resume took the run over from (``seen``: the run as it
        stood just before the claim): it never wrote one, and now never will (an attempt that finds
        its run taken over writes none, see :meth:`_lost`). So every attempt has exactly one row."""
        if seen.attempt_call_id is None:  # a run from before attempts had call ids: nothing to name
            return
        if claimed.attempts != seen.attempts + 1:  # another claim came between: its attempt is unknown here
            logger.warning("run %s: an attempt after %s left no row", seen.run_id, seen.attempt_call_id)
            return
        self._env.audit_attempt(abandoned_attempt(seen, call_id))

    def _lease(self) -> Lease:
        return new_lease(self._env.policy.runs.lease_seconds)

    def _busy(self, record: RunRecord, by: str, call_id: str) -> RunResult:
        """The answer (and audit row) of a resume refused because another attempt holds the run."""
        expires = record.lease_expires or time.time()
        retry_ms = max(1, int((expires - time.time()) * 1000))
        busy = RunBusy(
            f"run {record.run_id!r} is being executed by {record.lease_owner}; its lease expires in {retry_ms} ms"
            " unless renewed: resume it once that attempt has ended or its holder has died",
            details={"run_id": record.run_id, "holder": record.lease_owner, "retry_after_ms": retry_ms},
        )
        self._env.audit_attempt(
            RunAttempt(
                call_id, record.run_id, record.principal, by, None, record.first_call_id, record.attempt_call_id,
                "running", busy.code, busy, record.source, record.input, holder=record.lease_owner,
            )
        )  # fmt: skip
        meta = {"principal": record.principal, "attempts": record.attempts, "call_id": call_id, "by": by}
        return RunResult(record.run_id, "running", error=busy, meta=meta)

    def cancel(self, run_id: str, *, by: str | None = None) -> RunResult:
        """Mark the run ``cancelled`` unless it finished, as ``by`` (default: the run's own principal);
        a cancelled run never resumes. An attempt executing it stops at its next host call.

        The cancel writes one audit row (tool ``glovebox:run``, outcome ``cancelled``,
        ``egress.run.action`` ``cancel`` and ``by``), and the run's result names the
        canceller (``meta.cancelled_by``) and that row (``meta.call_id``). A run that
        had finished is answered as it ended: nothing changes, and no row is written.

        Raises:
            ValueError: there is no run ``run_id``.
        """
        record = self._get(run_id)
        who = by or record.principal
        while record.status not in FINISHED:
            call_id = uuid.uuid4().hex
            meta = {"principal": record.principal, "attempts": record.attempts, "call_id": call_id}
            saved = {"status": "cancelled", "calls": [], "meta": {**meta, "cancelled_by": who}}
            holder = record.lease_owner  # unchanged since read: no resume claimed the run meanwhile
            if self.store.set_status(run_id, "cancelled", saved, only_from=record.status, owner=holder):
                if record.status == "running" and holder and record.attempt_call_id and gone(holder):
                    self._env.audit_attempt(abandoned_attempt(record, call_id))  # it died: it will never write its row
                self._env.audit_attempt(
                    RunAttempt(
                        call_id, run_id, record.principal, who, None, record.first_call_id, record.attempt_call_id,
                        "cancelled", "cancelled", None, record.source, record.input, steps=record.steps,
                        holder=record.lease_owner if record.leased() else None, action="cancel",
                    )
                )  # fmt: skip
                break
            record = self._get(run_id)  # it moved on meanwhile (resumed, paused, or finished)
        return self.result_of(self._get(run_id))

    def execute(self, record: RunRecord, host_calls: Any) -> Any:
        """Run ``record``'s program once, in a fresh sandbox of its runner under the run's limits, with
        ``host_calls`` answering every host call (its ``host_call(kind, request)``) and no journal or
        lease touched: a replay against today's tools (:mod:`._drift`). The sandbox's outcome."""
        request = {"script": record.script, "input": record.input, "tools": self.tools.names(record.principal)}
        request["replay"] = False
        return self._env.sandbox.run(
            self._component(record.lang), json.dumps(request), self.limits, host_calls=host_calls
        )

    def result_of(self, record: RunRecord) -> RunResult:
        """A run's last known result, as the store holds it."""
        saved = record.result or {}
        error = saved.get("error")
        return RunResult(
            run_id=record.run_id,
            status=record.status if record.status in FINISHED or record.status == "paused" else "paused",
            output=saved.get("output"),
            error=None
            if error is None
            else call_error(error["code"], error["message"], error["details"], error["retryable"]),
            calls=list(saved.get("calls", [])),
            meta=dict(saved.get("meta", {})),
        )

    def _get(self, run_id: str) -> RunRecord:
        record = self.store.get(run_id) if isinstance(run_id, str) else None
        if record is None:
            raise ValueError(f"no run {run_id!r} in this home")
        return record

    def _attempt(
        self, record: RunRecord, component: Component, lease: Lease, call_id: str, *, by: str, previous: str | None
    ) -> RunResult:
        started = time.perf_counter()
        journal = self.store.recorded_steps(record.run_id)
        leased = LeasedStore(self.store, lease.owner)
        call = _parented(self.tools.call, call_id, time.time() + self.limits.timeout_ms / 1000)
        store = cast(RunStore, leased)  # the four journal writes RunHost makes, fenced by the lease
        host = RunHost(store, record.run_id, record.principal, journal, call, self.tools.search, self.bounds)
        leased.host = host
        request = {
            "script": record.script,
            "input": record.input,
            "tools": self.tools.names(record.principal),
            "replay": host.replayable,
        }
        with self._heartbeats.hold(record.run_id, lease, leased.lose):
            outcome = self._env.sandbox.run(component, json.dumps(request), self.limits, host_calls=host)
        status, output, error = ending(host, outcome.output_text, outcome.error)
        meta: dict[str, Any] = {
            "principal": record.principal,
            "steps": host.seq,
            "replayed": host.replayed,
            "attempts": record.attempts,
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
            "fuel_used": outcome.fuel_used,
            "call_id": call_id,
        }
        if record.attempts > 1:
            meta["resumed_by"] = by
        result = RunResult(record.run_id, status, output, error, host.calls, meta)
        outcome_code = "ok" if error is None else error.code
        if not self.store.set_status(record.run_id, status, result.to_dict(), only_from="running", owner=lease.owner):
            result, outcome_code = self._lost(record.run_id, leased.lost, result)
            if self._taken_over(record.run_id, call_id):
                return result  # the attempt that claimed the run wrote this one's row (``abandoned``)
        self._env.audit_attempt(
            RunAttempt(
                call_id, record.run_id, record.principal, by, record.attempts, record.first_call_id or call_id,
                previous, result.status, outcome_code, result.error, record.source, record.input,
                output=result.output, duration_ms=meta["duration_ms"], fuel_used=outcome.fuel_used,
                steps=host.seq, replayed=host.replayed, calls=len(host.calls),
            )
        )  # fmt: skip
        return result

    def _taken_over(self, run_id: str, call_id: str) -> bool:
        """Whether a resume claimed the run from attempt ``call_id`` (its row was written then)."""
        current = self._get(run_id)
        return current.attempt_call_id is not None and current.attempt_call_id != call_id

    def _lost(self, run_id: str, lost: CallError | None, mine: RunResult) -> tuple[RunResult, str]:
        """What an attempt whose end could not be written answers: the run was cancelled while it
        ran, or another attempt took the run over (this one stalled past its lease)."""
        current = self._get(run_id)
        if current.status == "cancelled":
            cancelled = self.result_of(current)
            meta = {**cancelled.meta, "call_id": mine.meta["call_id"]}  # this attempt's own row
            return RunResult(run_id, "cancelled", None, cancelled.error, mine.calls, meta), "cancelled"
        busy = lost or RunBusy(
            f"run {run_id!r} was taken over by {current.lease_owner} while this attempt ran (its lease expired)",
            details={"run_id": run_id, "holder": current.lease_owner},
            retryable=False,
        )
        if current.status in FINISHED:
            return self.result_of(current), busy.code
        return RunResult(run_id, "running", None, busy, mine.calls, mine.meta), busy.code


def _parented(call: CallTool, parent_call_id: str, deadline_at: float) -> CallTool:
    """``call`` with the attempt's audit call id (``parent_call_id``) and the run's deadline
    (``deadline_at``, epoch seconds) in each nested call's ``run`` context: the call is cut short
    when the run's time runs out (``glovebox.runtime._retry``), on whichever process or host runs it."""

    def nested(tool: str, input: Any, principal: str, call_id: str, run: dict[str, Any]) -> CallResult:
        context = {**run, "parent_call_id": parent_call_id, "deadline_at": deadline_at}
        return call(tool, input, principal, call_id, context)

    return nested
