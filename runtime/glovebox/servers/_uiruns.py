"""The console's code-mode runs: the list, one run with its steps, resume, cancel, roll back and save.

A viewer sees its own runs, or every principal's with ``glovebox:audit``; it
may resume, cancel or roll back a run of its own, or anyone's with
``glovebox:audit`` and the approver scope. An unknown run and one the viewer
may not see get the same 404. Any viewer who sees a run that ran to the end
may ask to save its program as a tool (:func:`glovebox.save_run`, as the
viewer): the policy decides (the scope ``glovebox:save``), and a refusal is a
403 page that says why.
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ..core._errors import GloveboxError, PermissionDenied
from ..runtime._runrollback import rollback_run
from ..runtime._runsave import SAVE_SCOPE, save_run
from ..runtime._runtime import Runtime
from ._refusals import BadRequest, Conflict, Forbidden, NotFound, requires
from ._uibase import AUDIT_SCOPE, PAGE_ROWS, ConsoleState, clip, int_param, pretty

__all__ = ["RunPages"]

_FINISHED = ("done", "failed", "cancelled")
#: The longest tool name the save form takes (the manifest checks the rest).
NAME_CHARS = 64
T = TypeVar("T")


class RunPages:
    """``/ui/runs``, ``/ui/runs/{id}`` and its forms: ``resume``, ``cancel``, ``rollback``, ``save``."""

    def __init__(self, ui: ConsoleState) -> None:
        self.ui = ui
        # Every backend keeps runs (``CallBackend.runs``); an object without them shows none.
        self.runs: Any = getattr(ui.runtime, "runs", None)

    def routes(self, viewers: list[Middleware], forms: list[Middleware]) -> list[BaseRoute]:
        return [
            Route("/ui/runs", self.index, methods=["GET"], middleware=viewers),
            Route("/ui/runs/{run_id}", self.show, methods=["GET"], middleware=viewers),
            Route("/ui/runs/{run_id}/resume", self.resume, methods=["POST"], middleware=forms),
            Route("/ui/runs/{run_id}/cancel", self.cancel, methods=["POST"], middleware=forms),
            Route("/ui/runs/{run_id}/rollback", self.rollback, methods=["POST"], middleware=forms),
            Route("/ui/runs/{run_id}/save", self.save, methods=["POST"], middleware=forms),
        ]

    @requires()
    async def index(self, request: Request) -> Response:
        every = AUDIT_SCOPE in request.auth.scopes
        offset = int_param(request.query_params.get("offset"), 0)
        records: list[Any] = []
        if self.runs is not None:
            principal = None if every else request.user.identity
            job = functools.partial(self.runs.list, principal=principal, limit=PAGE_ROWS + 1, offset=offset)
            records = await self.ui.run(job)
        seals = await self.ui.run(functools.partial(self._seals, records[:PAGE_ROWS]))
        return self.ui.page(
            request, "runs.html", records=records[:PAGE_ROWS], seals=seals, more=len(records) > PAGE_ROWS,
            offset=offset, page_rows=PAGE_ROWS, every=every, kept=self.runs is not None,
        )  # fmt: skip

    @requires()
    async def show(self, request: Request) -> Response:
        record, result = await self._visible(request)
        steps = await self.ui.run(functools.partial(self._steps, record.run_id))
        [seal] = await self.ui.run(functools.partial(self._seals, [record]))
        compensations = await self.ui.run(functools.partial(self.runs.store.compensations, record.run_id))
        return self.ui.page(
            request, "run.html", record=record, result=result, steps=steps, seal=seal,
            compensations=[compensations[seq] for seq in sorted(compensations, reverse=True)],
            savable=record.status == "done" and isinstance(self.ui.runtime, Runtime), save_scope=SAVE_SCOPE,
            saved=request.query_params.get("saved"),
            output=None if result.output is None else clip(pretty(result.output)),
            source=clip(record.source), may_act=self._may_act(request, record.principal),
            finished=record.status in _FINISHED,
        )  # fmt: skip

    @requires()
    async def resume(self, request: Request) -> Response:
        record = await self._actionable(request, "resume")
        if record.status != "paused":
            raise Conflict(f"run {record.run_id!r} is {record.status}: only a paused run resumes")
        # The nested calls stay the run's principal's; who pressed Resume is recorded.
        result = await self.ui.run(functools.partial(self.runs.resume, record.run_id, by=request.user.identity))
        if result.error is not None and result.error.code == "run_busy":
            raise Conflict(result.error.message)
        return RedirectResponse(f"/ui/runs/{record.run_id}", status_code=303)

    @requires()
    async def cancel(self, request: Request) -> Response:
        record = await self._actionable(request, "cancel")
        if record.status in _FINISHED:
            raise Conflict(f"run {record.run_id!r} has finished")
        await self.ui.run(functools.partial(self.runs.cancel, record.run_id, by=request.user.identity))
        return RedirectResponse(f"/ui/runs/{record.run_id}", status_code=303)

    @requires()
    async def rollback(self, request: Request) -> Response:
        record = await self._actionable(request, "roll back")
        if record.status not in _FINISHED:
            raise Conflict(f"run {record.run_id!r} is {record.status}: only a finished run is rolled back")
        job = functools.partial(rollback_run, self._runtime(), record.run_id, by=request.user.identity)
        result = await self._refusing(job)
        if result.status == "busy" and result.error is not None:
            raise Conflict(result.error.message)
        return RedirectResponse(f"/ui/runs/{record.run_id}#rollback", status_code=303)

    @requires()
    async def save(self, request: Request) -> Response:
        record, _ = await self._visible(request)
        runtime = self._runtime()
        form = request.state.form
        name = form.get("name", "").strip()
        if not name or len(name) > NAME_CHARS:
            raise BadRequest(f"a saved program needs a tool name of 1 to {NAME_CHARS} characters")
        job = functools.partial(
            save_run, runtime, record.run_id, name, by=request.user.identity, review=form.get("review") == "on"
        )
        info = await self._refusing(job)
        return RedirectResponse(f"/ui/runs/{record.run_id}?saved={info.name}@{info.version}", status_code=303)

    async def _refusing(self, job: functools.partial[T]) -> T:
        """``job`` on the workers, its refusals as the console renders them (the policy's word shown as it is)."""
        try:
            return await self.ui.run(job)
        except PermissionDenied as exc:
            raise Forbidden(exc.message) from None
        except GloveboxError as exc:  # a refused name or schema, a tampered run
            raise Conflict(f"{exc.code}: {exc.message}") from None
        except ValueError as exc:  # the run has not finished (or did not run to the end)
            raise Conflict(str(exc)) from None

    def _runtime(self) -> Runtime:
        """The backend as the Runtime that owns the home's registry and runs (a ``ProcessPool`` is one)."""
        if not isinstance(self.ui.runtime, Runtime):
            raise Conflict("this server's backend keeps no registry of its own: save or roll back where the home is")
        return self.ui.runtime

    def _seals(self, records: list[Any]) -> list[dict[str, Any]]:
        """Each run's program digest and how its rollback stands (None: never rolled back)."""
        found = self.runs.store.seals([r.run_id for r in records])
        seals = [found.get(r.run_id, (None, None)) for r in records]
        return [{"digest": digest, "rollback": rollback} for digest, rollback in seals]

    async def _visible(self, request: Request) -> tuple[Any, Any]:
        """The run's record and result when the viewer may see it, else :class:`NotFound`."""
        run_id = request.path_params["run_id"]
        found = await self.ui.run(functools.partial(self._find, request, run_id))
        if found is None:  # one answer for an unknown id and another principal's run
            raise NotFound(f"no run {run_id!r} you may see")
        return found

    def _find(self, request: Request, run_id: str) -> tuple[Any, Any] | None:
        if self.runs is None or len(run_id) > 64:
            return None
        record = self.runs.record(run_id)
        if record is None or not (record.principal == request.user.identity or AUDIT_SCOPE in request.auth.scopes):
            return None
        return record, self.runs.show(run_id)

    async def _actionable(self, request: Request, action: str) -> Any:
        record, _ = await self._visible(request)
        if not self._may_act(request, record.principal):
            raise Forbidden(
                f"principal {request.user.identity!r} may not {action} another principal's run: that takes the"
                f" scopes {AUDIT_SCOPE!r} and {self.ui.approver_scope!r}"
            )
        return record

    def _may_act(self, request: Request, owner: str) -> bool:
        """Resume or cancel: the run's own principal, or an approver who may see every run."""
        scopes = request.auth.scopes
        return owner == request.user.identity or (AUDIT_SCOPE in scopes and self.ui.approver_scope in scopes)

    def _steps(self, run_id: str) -> list[dict[str, Any]]:
        rows = []
        for step in self.runs.journal(run_id):
            result = step.result if isinstance(step.result, dict) else {}
            request = step.request if isinstance(step.request, dict) else {}
            error = result.get("error") if step.kind == "call" else None
            if step.kind == "call":
                shown = result.get("output") if result.get("ok") else None
                code = (error or {}).get("code", "ok") if step.state == "done" else step.state
            else:
                shown, code = result, "ok" if step.state == "done" else step.state
            duration = None if step.finished is None else round((step.finished - step.started) * 1000, 3)
            rows.append({
                "seq": step.seq, "kind": step.kind, "tool": request.get("tool", ""), "code": code,
                "duration_ms": duration, "reran": step.reran, "call_id": step.call_id,
                "input": clip(pretty(request.get("input"))) if step.kind == "call" else None,
                "output": None if shown is None else clip(pretty(shown)),
                "error": None if not error else f"{error.get('code')}: {error.get('message')}",
            })  # fmt: skip
        return rows
