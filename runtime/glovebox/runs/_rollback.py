"""Rolling a run back: the compensations of its completed writes, newest first, each a full call.

A tool declares the tool that undoes it in its manifest (``compensate: {tool,
input_from}``, :class:`~glovebox.model._manifest.Compensation`). Rolling back a
finished run (``done``, ``failed`` or ``cancelled``) walks its journal from the
last step to the first; for every tool call that succeeded and whose tool (the
version that answered it) declares a compensation, it calls that tool with the
input ``input_from`` builds from the call's input and output. Each compensation
is a full call of the run's principal (the policy's decision, scopes, quotas,
validation, its own audit row, whose ``egress.run`` names the run, the step it
undoes and ``action`` ``rollback``), journaled in the store
(:mod:`._compensations`) so that a rollback that dies (SIGKILL) and is made again
calls every completed compensation once; only one in flight at the crash is
called again, under the same call id, marked ``reran``.

The first compensation that fails stops the rollback (``incomplete``: a failed
compensation needs a person, and undoing older writes first could make things
worse); rolling back again tries it again. A compensation that answers
``approval_required`` stops it the same way, and runs once approved. A step whose
tool declares none is listed as ``skipped``. A tampered journal is refused
(:mod:`._seal`) before anything is called.
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..core._errors import CallError, RunBusy, call_error
from ..model._manifest import Compensation as Declared
from ._env import RunEnvironment
from ._leases import Heartbeats, dead_holder, new_lease
from ._records import FINISHED, JournalStep, Lease
from ._store import RunStore

__all__ = ["ROLLBACK_STATUSES", "RollbackResult", "Rollbacks", "compensation_input"]

#: How a rollback ends: every compensation made, or stopped at one that failed or waits (or another holds the run).
ROLLBACK_STATUSES = ("rolled_back", "incomplete", "busy")


@dataclass(frozen=True)
class RollbackResult:
    """How a rollback ended.

    Attributes:
        run_id: the run rolled back.
        status: ``rolled_back`` (every compensation made), ``incomplete`` (stopped at one that
            failed or waits for an approval: ``error``) or ``busy`` (another process holds the run).
        compensations: one entry per completed tool call, newest first: ``step``, ``tool`` (the call's
            ``name@version``), ``compensation`` (the tool that undoes it, None when ``skipped``),
            ``call_id``, ``code`` (None when it succeeded), ``replayed`` (made by an earlier
            rollback) and ``reran`` (in flight when an earlier rollback died).
        error: why it stopped, when it did.
    """

    run_id: str
    status: str
    compensations: list[dict[str, Any]] = field(default_factory=list)
    error: CallError | None = None

    @property
    def ok(self) -> bool:
        """Whether every compensation was made."""
        return self.status == "rolled_back"

    def to_dict(self) -> dict[str, Any]:
        """``run_id``, ``status``, ``ok``, ``compensations`` and, when it stopped, ``error``."""
        envelope: dict[str, Any] = {"run_id": self.run_id, "status": self.status, "ok": self.ok}
        if self.error is not None:
            envelope["error"] = self.error.to_dict()
        envelope["compensations"] = [dict(entry) for entry in self.compensations]
        return envelope


def _resolve(document: Any, pointer: str) -> Any:
    """The value at JSON pointer ``pointer`` of ``document``; KeyError when there is none."""
    value = document
    for token in pointer.split("/")[1:] if pointer else []:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            raise KeyError(pointer)
    return value


def _assign(document: Any, pointer: str, value: Any) -> Any:
    """``document`` with ``value`` at ``pointer`` (objects made along the way); the new document."""
    if not pointer:
        return copy.deepcopy(value)
    tokens = [token.replace("~1", "/").replace("~0", "~") for token in pointer.split("/")[1:]]
    root = document if isinstance(document, dict) else {}
    node = root
    for token in tokens[:-1]:
        if not isinstance(node.get(token), dict):
            node[token] = {}
        node = node[token]
    node[tokens[-1]] = copy.deepcopy(value)
    return root


def compensation_input(declared: Declared, input: Any, output: Any) -> Any:
    """The compensating call's input: ``declared.input_from`` applied (see the manifest's ``compensate``).

    >>> from glovebox.model._manifest import Compensation
    >>> undo = Compensation(tool="unpublish", input_from={"/id": "/output/id", "/why": "/input/reason"})
    >>> compensation_input(undo, {"text": "hi", "reason": "rollback"}, {"id": 7})
    {'id': 7, 'why': 'rollback'}

    Raises:
        KeyError: a pointer names nothing in the call's input or output.
    """
    if not declared.input_from:
        return copy.deepcopy(input)
    source = {"input": input, "output": output}
    built: Any = {}
    for target in sorted(declared.input_from):
        built = _assign(built, target, _resolve(source, declared.input_from[target]))
    return built


class Rollbacks:
    """Rolls back the runs of one store, calling compensations in ``env`` (see the module docstring)."""

    def __init__(self, store: RunStore, env: RunEnvironment) -> None:
        self.store = store
        self._env = env
        self._heartbeats = Heartbeats(store)

    def rollback(self, run_id: str, *, by: str | None = None) -> RollbackResult:
        """Call the compensations of run ``run_id``'s completed writes, newest first (``by``: who asked,
        recorded in each compensation's audit row; the calls are the run's principal's).

        Raises:
            ValueError: there is no run ``run_id``, or it has not finished (cancel a paused run first).
            ProgramChanged, JournalTampered: the stored run is not what it wrote.
        """
        record = self.store.get(run_id) if isinstance(run_id, str) else None
        if record is None:
            raise ValueError(f"no run {run_id!r} in this home")
        if record.status not in FINISHED:
            raise ValueError(f"run {run_id!r} is {record.status}: only a finished run is rolled back (cancel it first)")
        self.store.check(run_id)
        lease = new_lease(self._env.policy.runs.lease_seconds)
        if not self.store.claim_rollback(run_id, lease, dead=dead_holder(record)):
            holder = (self.store.get(run_id) or record).lease_owner
            busy = RunBusy(f"run {run_id!r} is being rolled back by {holder}", details={"holder": holder})
            return RollbackResult(run_id, "busy", error=busy)
        lost: list[CallError] = []
        try:
            with self._heartbeats.hold(run_id, lease, lost.append):
                result = self._compensate(record.run_id, record.principal, by or record.principal, lease)
        except BaseException:
            if not lost:
                self.store.release_rollback(run_id, lease.owner, "incomplete")
            raise
        if not lost:
            self.store.release_rollback(run_id, lease.owner, "rolled_back" if result.ok else "incomplete")
        return result

    def _compensate(self, run_id: str, principal: str, by: str, lease: Lease) -> RollbackResult:
        made = self.store.compensations(run_id)
        tools = {f"{info.name}@{info.version}": info for info in self._env.visible_tools(principal)}
        entries: list[dict[str, Any]] = []
        for step in reversed(self.store.journal(run_id)):
            envelope = step.result if step.kind == "call" and step.state == "done" else None
            if not isinstance(envelope, dict) or not envelope.get("ok"):
                continue  # not a completed call: nothing to undo
            meta = envelope.get("meta", {})
            name = f"{meta.get('tool')}@{meta.get('version')}"
            info = tools.get(name)
            declared = None if info is None else info.manifest.compensate
            entry: dict[str, Any] = {"step": step.seq, "tool": name, "compensation": None, "call_id": None}
            entry |= {"code": None, "replayed": False, "reran": False}
            entries.append(entry)
            if declared is None:
                entry["skipped"] = "no compensation declared" if info is not None else "tool not visible"
                continue
            entry["compensation"] = declared.tool
            error = self._one(run_id, principal, by, lease, step, declared, made.get(step.seq), entry)
            if error is not None:
                return RollbackResult(run_id, "incomplete", entries, error)
        return RollbackResult(run_id, "rolled_back", entries)

    def _one(
        self,
        run_id: str,
        principal: str,
        by: str,
        lease: Lease,
        step: JournalStep,
        declared: Declared,
        before: Any,
        entry: dict[str, Any],
    ) -> CallError | None:
        """Make (or replay) the compensation of ``step``; the error that stops the rollback, if any."""
        if before is not None and before.state == "done":
            entry |= {"call_id": before.call_id, "replayed": True}
            return None
        try:
            value = compensation_input(declared, step.request.get("input"), step.result.get("output"))
        except KeyError as exc:
            failed = call_error(
                "invalid_input",
                f"the compensation of step {step.seq} ({declared.tool}): {exc.args[0]!r} names nothing in the call",
                {"step": step.seq, "pointer": exc.args[0]},
                False,
            )
            entry["code"] = failed.code
            return failed
        call_id = before.call_id if before is not None and before.state == "started" else uuid.uuid4().hex
        entry |= {"call_id": call_id, "reran": before is not None and before.state == "started"}
        self.store.begin_compensation(run_id, step.seq, declared.tool, value, call_id, owner=lease.owner)
        context = {"run_id": run_id, "step": step.seq, "action": "rollback", "by": by}
        answer = self._env.call(declared.tool, value, principal, call_id, context)
        envelope = answer.to_dict()
        if answer.error is not None and answer.error.code == "approval_required":
            self.store.forget_compensation(run_id, step.seq, owner=lease.owner)
        else:
            self.store.finish_compensation(run_id, step.seq, envelope, owner=lease.owner)
        entry["code"] = None if answer.error is None else answer.error.code
        return answer.error
