"""Runs: start one, resume one, cancel one; each attempt is one invocation of the code runner.

An attempt re-executes the program from the start in a fresh sandbox of the
code runner (``guest/js/runner.js``) under the run's own limits (fuel, memory,
and a wall-clock deadline that nested calls count against), with a
:class:`~glovebox.runs._host.RunHost` answering its host calls. How it ended,
decided here in this order:

1. a nested call answered ``approval_required``: ``paused`` (the error names the approval);
2. the program diverged from its journal or reached a bound: ``failed`` with
   ``run_diverged`` or ``run_limit``;
3. the runner failed (the program looped, hoarded memory, threw):
   ``failed`` with the sandbox's code (``fuel_exhausted``, ``memory_limit``,
   ``timeout``, ``guest_error``, ``invalid_output``);
4. the program let a nested call's ``ToolCallError`` escape: ``failed`` with that
   call's code and message;
5. else ``done`` with the program's value.

**Accountability.** Each attempt (the first execution, and each resume) has an
audit call id of its own, and ends by handing a :class:`RunAttempt` to the
``audit`` function it was given (``glovebox.runtime._coderun`` writes it as the
attempt's audit row); every nested call of the attempt carries that call id as
``parent_call_id`` in its own row's ``egress.run``. One row per attempt, not per
run: an attempt is what someone started or resumed, so each row says who
(``by``), how it ended, and what it cost, and a resume by an operator is never
folded into the row of the run's owner.

An attempt that never ends (its process killed by SIGKILL, or stalled past its
lease) cannot write its row: the resume that claims the run from it writes it,
under its call id, with outcome :data:`ABANDONED`; the stalled attempt, finding
its run claimed, writes none, so every attempt has exactly one row. A cancel
writes a row of its own (``action`` ``cancel``, ``by`` the canceller), and the
dead attempt's too when its holder was a process of this host that is gone; a
cancel of a finished run changes nothing and writes none.

**The deadline.** An attempt's wall-clock deadline (``limits.timeout_ms``)
bounds its nested calls too: each carries it in its run context
(``deadline_at``, epoch seconds, across a ProcessPool's wire and a Ray call),
and a call still running when it passes is cut short with ``timeout``, so the
run ends by its deadline, not by its slowest tool's.

**The lease.** An attempt holds the run's lease (:mod:`._store`) from its claim to
its end, renewed by the runner's lease thread every third of its length; its journal
writes are fenced by it. A resume that finds a live lease does nothing and
answers ``status: running`` with :class:`~glovebox.RunBusy` naming the holder.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from wasmtime.component import Component

from ..core._errors import CallError, InvalidInput, InvalidOutput, RunBusy, call_error
from ..core._jsonlimits import JsonRejected, check_value
from ..core._jsonlimits import loads as loads_json
from ..model._manifest import MIB, Limits
from ..model._result import CallResult
from ..sandbox._sandbox import Sandbox
from ._host import CallTool, RunBounds, RunHost, SearchTools
from ._result import RunResult
from ._store import FINISHED, Lease, RunRecord, RunStore

__all__ = ["ABANDONED", "DEFAULT_LEASE_S", "RUN_LIMITS", "RunAttempt", "Runner"]

logger = logging.getLogger("glovebox.runs")

#: How long an attempt's lease lasts without renewal (the policy's ``runs.lease_seconds``).
DEFAULT_LEASE_S = 30.0


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


#: The outcome (and ``egress.run.action``) of the row written for an attempt that never wrote its own.
ABANDONED = "abandoned"

#: What the runner hands each attempt's facts to (the Runtime writes them as the attempt's audit row).
AuditAttempt = Callable[[RunAttempt], None]

#: The program's own limits (its nested calls have theirs): ~2 s of interpreted JavaScript,
#: 64 MiB, and one minute of wall clock for the whole run, nested calls included.
RUN_LIMITS = Limits(fuel=20_000_000_000, memory_bytes=64 * MIB, timeout_ms=60_000, output_bytes=1 * MIB)


class Runner:
    """Starts, resumes and cancels the runs of one home."""

    def __init__(
        self,
        store: RunStore,
        sandbox: Callable[[], Sandbox],
        component: Callable[[], Component],
        call: CallTool,
        search: SearchTools,
        visible: Callable[[str], list[str]],
        *,
        limits: Limits = RUN_LIMITS,
        bounds: RunBounds | None = None,
        audit: AuditAttempt | None = None,
        lease_s: Callable[[], float] = lambda: DEFAULT_LEASE_S,
    ) -> None:
        self.store = store
        self._heartbeats = _Heartbeats(store)
        self._audit = audit or (lambda attempt: None)
        self._lease_s = lease_s
        self._sandbox = sandbox
        self._component = component
        self._call = call
        self._search = search
        self._visible = visible
        self.limits = limits
        self.bounds = bounds or RunBounds()

    def start(self, script: str, *, lang: str, source: str, input: Any, principal: str) -> RunResult:
        """Record a new run and make its first attempt."""
        try:
            check_value(input)
        except JsonRejected as exc:
            raise InvalidInput(f"the run's input breaks the JSON rules: {exc}") from exc
        component = self._component()  # (built on first use: before the run exists, its lease or deadline)
        lease, call_id = self._lease(), uuid.uuid4().hex
        run_id = self.store.create(principal, lang, source, script, input, lease=lease, call_id=call_id)
        record = self.store.get(run_id)
        assert record is not None
        return self._attempt(record, component, lease, call_id, by=principal, previous=None)

    def refuse(self, principal: str, error: CallError, *, source: str, input: Any) -> RunResult:
        """A run refused before it existed (a quota): ``failed`` with ``error``, and its audit row."""
        call_id = uuid.uuid4().hex
        facts = (None, None, None, "failed", error.code, error, source, input)
        self._audit(RunAttempt(call_id, None, principal, principal, *facts))
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
        component = self._component()  # (built on first use: before the claim starts the lease's clock)
        lease, call_id = self._lease(), uuid.uuid4().hex
        claimed = self.store.claim(run_id, ("paused", "running"), lease=lease, by=who, call_id=call_id)
        if claimed is None and (dead := _dead_holder(seen := self._get(run_id))) is not None:
            record = seen
            claimed = self.store.claim(run_id, ("paused", "running"), lease=lease, by=who, call_id=call_id, dead=dead)
        if claimed is None:
            current = self._get(run_id)
            if current.status not in FINISHED and current.leased():
                return self._busy(current, who, call_id)
            return self.result_of(current)  # finished meanwhile
        if record.status == "running":  # its last attempt never ended: it died, or stalled past its lease
            self._abandoned(record, claimed, call_id)
        return self._attempt(claimed, component, lease, call_id, by=who, previous=record.attempt_call_id)

    def _abandoned(self, seen: RunRecord, claimed: RunRecord, call_id: str) -> None:
        """Write the row of the attempt this resume took the run over from (``seen``: the run as it
        stood just before the claim): it never wrote one, and now never will (an attempt that finds
        its run taken over writes none, see :meth:`_lost`). So every attempt has exactly one row."""
        if seen.attempt_call_id is None:  # a run from before attempts had call ids: nothing to name
            return
        if claimed.attempts != seen.attempts + 1:  # another claim came between: its attempt is unknown here
            logger.warning("run %s: an attempt after %s left no row", seen.run_id, seen.attempt_call_id)
            return
        self._audit(_abandoned_attempt(seen, call_id))

    def _lease(self) -> Lease:
        owner = f"{socket.gethostname()}/pid {os.getpid()}/{uuid.uuid4().hex[:8]}"
        return Lease(owner, float(self._lease_s()))

    def _busy(self, record: RunRecord, by: str, call_id: str) -> RunResult:
        """The answer (and audit row) of a resume refused because another attempt holds the run."""
        expires = record.lease_expires or time.time()
        retry_ms = max(1, int((expires - time.time()) * 1000))
        busy = RunBusy(
            f"run {record.run_id!r} is being executed by {record.lease_owner}; its lease expires in {retry_ms} ms"
            " unless renewed: resume it once that attempt has ended or its holder has died",
            details={"run_id": record.run_id, "holder": record.lease_owner, "retry_after_ms": retry_ms},
        )
        self._audit(
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
                if record.status == "running" and holder and record.attempt_call_id and _gone(holder):
                    self._audit(_abandoned_attempt(record, call_id))  # it died: it will never write its row
                self._audit(
                    RunAttempt(
                        call_id, run_id, record.principal, who, None, record.first_call_id, record.attempt_call_id,
                        "cancelled", "cancelled", None, record.source, record.input, steps=record.steps,
                        holder=record.lease_owner if record.leased() else None, action="cancel",
                    )
                )  # fmt: skip
                break
            record = self._get(run_id)  # it moved on meanwhile (resumed, paused, or finished)
        return self.result_of(self._get(run_id))

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
        leased = _LeasedStore(self.store, lease.owner)
        call = _parented(self._call, call_id, time.time() + self.limits.timeout_ms / 1000)
        store = cast(RunStore, leased)  # the four journal writes RunHost makes, fenced by the lease
        host = RunHost(store, record.run_id, record.principal, journal, call, self._search, self.bounds)
        leased.host = host
        request = {
            "script": record.script,
            "input": record.input,
            "tools": self._visible(record.principal),
            "replay": host.replayable,
        }
        with self._heartbeats.hold(record.run_id, lease, leased.lose):
            outcome = self._sandbox().run(component, json.dumps(request), self.limits, host_calls=host)
        status, output, error = _ending(host, outcome.output_text, outcome.error)
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
        self._audit(
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


def _abandoned_attempt(seen: RunRecord, taken_over_by: str) -> RunAttempt:
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


def _dead_holder(record: RunRecord) -> str | None:
    """The lease owner of ``record`` when it is a process of this host that no longer exists (killed,
    say, by SIGKILL): its lease need not be waited out. None when the holder lives, may live (another
    host, another user's process), or there is no live lease."""
    owner = record.lease_owner
    if owner is None or not record.leased():
        return None
    return owner if _gone(owner) else None


def _gone(owner: str) -> bool:
    """Whether lease owner ``owner`` is a process of this host that no longer exists (whether or not
    its lease has expired); False when it lives or may live (another host, another user's process)."""
    host, _, rest = owner.partition("/pid ")
    pid = rest.partition("/")[0]
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists (another user's process)
        return False
    return False


def _parented(call: CallTool, parent_call_id: str, deadline_at: float) -> CallTool:
    """``call`` with the attempt's audit call id (``parent_call_id``) and the run's deadline
    (``deadline_at``, epoch seconds) in each nested call's ``run`` context: the call is cut short
    when the run's time runs out (``glovebox.runtime._retry``), on whichever process or host runs it."""

    def nested(tool: str, input: Any, principal: str, call_id: str, run: dict[str, Any]) -> CallResult:
        context = {**run, "parent_call_id": parent_call_id, "deadline_at": deadline_at}
        return call(tool, input, principal, call_id, context)

    return nested


class _LeasedStore:
    """The run store as one attempt's :class:`RunHost` writes it: every journal write fenced by the
    attempt's lease. A write refused (the lease is gone) stops the program: ``RunBusy``."""

    def __init__(self, store: RunStore, owner: str) -> None:
        self._store = store
        self._owner = owner
        self.host: RunHost | None = None
        #: Why the attempt lost its lease (None while it holds it).
        self.lost: CallError | None = None

    def lose(self, why: CallError) -> None:
        """Stop the attempt: its next host call answers ``stop``, and it ends with ``why``."""
        if self.lost is None:
            self.lost = why
        if self.host is not None and self.host.stopped is None:
            self.host.stopped = why

    def begin_step(
        self, run_id: str, seq: int, kind: str, request_text: str, call_id: str | None, **texts: Any
    ) -> None:
        self._fenced(self._store.begin_step, run_id, seq, kind, request_text, call_id, **texts)

    def record_step(self, run_id: str, seq: int, kind: str, request_text: str, result_text: str, **texts: Any) -> None:
        self._fenced(self._store.record_step, run_id, seq, kind, request_text, result_text, **texts)

    def finish_step(self, run_id: str, seq: int, result_text: str, **texts: Any) -> None:
        self._fenced(self._store.finish_step, run_id, seq, result_text, **texts)

    def forget_step(self, run_id: str, seq: int) -> None:
        self._fenced(self._store.forget_step, run_id, seq)

    def _fenced(self, write: Callable[..., None], *args: Any, **texts: Any) -> None:
        try:
            write(*args, **texts, owner=self._owner)
        except RunBusy as lost:
            self.lose(lost)
            raise


class _Heartbeats:
    """One thread renewing the leases of every attempt a runner executes, each every third of its
    length; a renewal that finds a lease gone stops that attempt. The thread starts with the first
    attempt and ends once none has been held for :data:`_IDLE_S` (a thread per attempt cost ~1.6 ms
    of each run to start and join)."""

    def __init__(self, store: RunStore) -> None:
        self._store = store
        self._lock = threading.Condition()
        #: Each held lease: [when it is next renewed (monotonic), run_id, lease, lose].
        self._held: dict[int, list[Any]] = {}
        self._next_key = 0
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def hold(self, run_id: str, lease: Lease, lose: Callable[[CallError], None]) -> Iterator[None]:
        """Renew ``lease`` on ``run_id`` while the block runs."""
        with self._lock:
            key = self._next_key
            self._next_key += 1
            self._held[key] = [time.monotonic() + lease.seconds / 3, run_id, lease, lose]
            if self._thread is None:
                self._thread = threading.Thread(target=self._beat, name="glovebox-run-leases", daemon=True)
                self._thread.start()
            self._lock.notify()
        try:
            yield
        finally:
            with self._lock:
                self._held.pop(key, None)

    def _beat(self) -> None:
        while True:
            with self._lock:
                due = self._due()
                while due is None:
                    idle_since = time.monotonic()
                    while not self._held:
                        left = _IDLE_S - (time.monotonic() - idle_since)
                        if left <= 0:
                            self._thread = None
                            return
                        self._lock.wait(left)
                    due = self._due()
            for key, run_id, lease, lose in due:
                if not self._renew(run_id, lease, lose):
                    with self._lock:
                        self._held.pop(key, None)

    def _due(self) -> list[tuple[int, str, Lease, Callable[[CallError], None]]] | None:
        """The leases due for renewal now (each rescheduled), waiting (under the lock) until one is;
        None when none is held."""
        while self._held:
            now = time.monotonic()
            soonest = min(entry[0] for entry in self._held.values())
            if soonest > now:
                self._lock.wait(soonest - now)
                continue
            due = []
            for key, entry in self._held.items():
                if entry[0] <= now:
                    entry[0] = now + entry[2].seconds / 3
                    due.append((key, entry[1], entry[2], entry[3]))
            return due
        return None

    def _renew(self, run_id: str, lease: Lease, lose: Callable[[CallError], None]) -> bool:
        """Renew one lease; False once it is gone (the attempt was told to stop)."""
        try:
            held = self._store.renew(run_id, lease)
        except Exception:  # a locked or closed database: the fenced writes still decide
            logger.warning("cannot renew the lease of run %s", run_id, exc_info=True)
            return True
        if held:
            return True
        now = self._store.get(run_id)
        holder = None if now is None else now.lease_owner
        lose(
            RunBusy(
                f"run {run_id!r} is no longer held by this attempt ({lease.owner}):"
                + (" it was cancelled" if holder is None else f" {holder} took it over"),
                details={"run_id": run_id, "holder": holder, "lost_by": lease.owner},
                retryable=False,
            )
        )
        return False


#: Seconds the lease thread waits for another attempt before it ends.
_IDLE_S = 5.0


def _ending(host: RunHost, text: str | None, failed: CallError | None) -> tuple[str, Any, CallError | None]:
    """How an attempt ended (the order of the module docstring)."""
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
