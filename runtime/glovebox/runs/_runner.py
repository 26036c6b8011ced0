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
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from wasmtime.component import Component

from ..core._errors import CallError, InvalidInput, InvalidOutput, call_error
from ..core._jsonlimits import JsonRejected, check_value
from ..core._jsonlimits import loads as loads_json
from ..model._manifest import MIB, Limits
from ..sandbox._sandbox import Sandbox
from ._host import CallTool, RunBounds, RunHost, SearchTools
from ._result import RunResult
from ._store import FINISHED, RunRecord, RunStore

__all__ = ["RUN_LIMITS", "Runner"]

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
    ) -> None:
        self.store = store
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
        run_id = self.store.create(principal, lang, source, script, input)
        record = self.store.get(run_id)
        assert record is not None
        return self._attempt(record)

    def resume(self, run_id: str) -> RunResult:
        """Make another attempt at a paused run, or one whose process died (``running``).

        A finished run is answered as it ended, without running anything.

        Raises:
            ValueError: there is no run ``run_id``.
        """
        record = self._get(run_id)
        if record.status in FINISHED:
            return self.result_of(record)
        claimed = self.store.claim(run_id, ("paused", "running"))
        if claimed is None:  # finished meanwhile
            return self.result_of(self._get(run_id))
        return self._attempt(claimed)

    def cancel(self, run_id: str) -> RunResult:
        """Mark the run ``cancelled`` unless it finished; a cancelled run never resumes.

        Raises:
            ValueError: there is no run ``run_id``.
        """
        record = self._get(run_id)
        if record.status not in FINISHED:
            self.store.set_status(run_id, "cancelled", {"status": "cancelled", "calls": [], "meta": {}})
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

    def _attempt(self, record: RunRecord) -> RunResult:
        started = time.perf_counter()
        journal = self.store.recorded_steps(record.run_id)
        host = RunHost(self.store, record.run_id, record.principal, journal, self._call, self._search, self.bounds)
        request = {"script": record.script, "input": record.input, "tools": self._visible(record.principal)}
        outcome = self._sandbox().run(self._component(), json.dumps(request), self.limits, host_calls=host)
        status, output, error = _ending(host, outcome.output_text, outcome.error)
        meta = {
            "principal": record.principal,
            "steps": host.seq,
            "replayed": host.replayed,
            "attempts": record.attempts,
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
            "fuel_used": outcome.fuel_used,
        }
        result = RunResult(record.run_id, status, output, error, host.calls, meta)
        saved = result.to_dict()
        if not self.store.set_status(record.run_id, status, saved, only_from="running"):
            return self.result_of(self._get(record.run_id))  # cancelled while it ran
        return result


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
    return "done", answer.get("output") if isinstance(answer, dict) else None, None
