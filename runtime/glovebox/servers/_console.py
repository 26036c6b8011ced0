"""The operator console: server-rendered pages under ``/ui`` of ``glovebox serve``.

Pages (HTML; Jinja2 templates and a stylesheet shipped in ``servers/ui/``)::

    GET  /ui/signin                 the sign-in form (an API key)
    POST /ui/signin                 starts a session (cookie), then to /ui/tools
    POST /ui/signout                ends it
    GET  /ui/approvals              pending requests (the approver scope), kept live by ui/static/console.js
    GET  /ui/approvals/mark         {"mark": ...}, which changes whenever the pending requests do (the approver scope)
    POST /ui/approvals/{id}/approve approve one, as the viewer (the approver scope)
    POST /ui/approvals/{id}/deny    deny one with a reason the caller is told (the approver scope)
    GET  /ui/audit                  the log, newest first, filtered (principal, tool, outcome, since,
                                    until), paginated by seq (glovebox:audit)
    GET  /ui/audit/{seq}            one record (glovebox:audit)
    POST /ui/audit/verify           walk the chain, show the result (glovebox:audit)
    GET  /ui/audit/export.jsonl     the whole log as JSON Lines (glovebox:audit)
    GET  /ui/runs                   code-mode runs, newest first, paginated: the viewer's own; every
                                    principal's with glovebox:audit
    GET  /ui/runs/{id}              one run: its steps from the journal, its output or error (as the list)
    POST /ui/runs/{id}/resume       resume a paused run, as the run's own principal (its principal, or an
                                    approver who may see it; who pressed it is kept in the run and in
                                    the attempt's audit row)
    POST /ui/runs/{id}/cancel       cancel an unfinished run (as resume; who pressed it is kept in the run,
                                    ``cancelled_by``, and in the cancel's audit row)
    GET  /ui/tools                  the tools the viewer may see, each with its last calls' outcomes (any principal)
    GET  /ui/health                 policy digest and error, admission counters, breakers, and charts of
                                    the last 30 minutes' calls by outcome and p50/p99 (glovebox:audit)

Who: a request with an API key header (``Authorization: Bearer KEY`` or
``X-API-Key``) is that key's principal; otherwise the session cookie names
one (``HttpOnly``, ``SameSite=Strict``, ``Secure`` over TLS; its value is an
opaque id, see ``servers._sessions``). A page asked for without either is
redirected to the sign-in form; a form posted without either answers 401.
Every form carries a CSRF token (the session's, or for the sign-in form a
double-submitted cookie) and a post whose token is missing or wrong answers
403, as does one whose ``Origin`` is another site. Pages a principal lacks the
scope for answer 403. Every answer carries ``Content-Security-Policy:
default-src 'self'`` (no inline script or style runs: the one script is
``ui/static/console.js``), ``X-Frame-Options:
DENY`` and ``Cache-Control: no-store``; every value is escaped by Jinja's
autoescape.
"""

from __future__ import annotations

import asyncio
import functools
import json
import secrets
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlencode

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from ..audit._filter import parse_since
from ..audit._log import AuditLog, record_json
from ..core._canonical import canonical_json, sha256_digest
from ..core._errors import GloveboxError
from ..policy import ApprovalStore
from ..runtime._backend import CallBackend
from ..runtime._coderun import AUDIT_SCOPE
from . import _charts
from ._auth import AuthFailure, _key_from, authenticate
from ._sessions import COOKIE, Session, Sessions, same_token

__all__ = ["AUDIT_SCOPE", "PAGE_ROWS", "console_routes"]

#: Rows on one page of approvals or audit records.
PAGE_ROWS = 50
#: Outcomes of a tool's last calls shown on the tools page.
RECENT_CALLS = 10
#: Characters of a stored input shown on the approvals page.
INPUT_CHARS = 2000
#: Characters of a step's request or result, or a run's source, shown on a run's page.
STEP_CHARS = 4000
#: The longest reason a denial may give (it reaches the caller in the error message).
REASON_CHARS = 500
SIGNIN_COOKIE = "glovebox_signin"
_UI = Path(__file__).parent / "ui"
_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make a form's Origin "null"
    "Cache-Control": "no-store",
}
T = TypeVar("T")


def iso(seconds: float | None) -> str:
    """Unix seconds as ISO 8601 UTC (``2026-12-01T16:40:00Z``); empty for None."""
    if seconds is None:
        return ""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def policy_digest(runtime: CallBackend) -> str:
    """``sha256:`` of the policy in force, as canonical JSON."""
    return sha256_digest(canonical_json(runtime.policy.model_dump(mode="json")))


def _pretty(value: Any) -> str:
    """A JSON value (or JSON text, as the audit stores it) indented; other text as it is."""
    if isinstance(value, str):
        text = value
        try:
            value = json.loads(text)
        except ValueError:
            return text
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


class _Viewer:
    def __init__(self, principal: str, session: Session | None, session_id: str | None) -> None:
        self.principal = principal
        self.session = session
        self.session_id = session_id

    @property
    def csrf(self) -> str:
        return self.session.csrf if self.session is not None else ""


class _Console:
    def __init__(self, runtime: CallBackend, pool: ThreadPoolExecutor, insecure_anonymous: bool) -> None:
        self.runtime = runtime
        self.pool = pool
        self.insecure_anonymous = insecure_anonymous
        self.sessions = Sessions()
        self.audit: AuditLog = runtime.audit
        # Pages of the home's requests are read here; approving goes through the backend (its scope check).
        self.requests = ApprovalStore(runtime.home)
        loader = jinja2.FileSystemLoader(str(_UI / "templates"))
        self.templates = jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined)
        self.templates.filters["iso"] = iso
        self.templates.filters["pretty"] = _pretty

    def close(self) -> None:
        self.requests.close()

    async def _run(self, job: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.pool, job)

    # -- who -----------------------------------------------------------------

    def _viewer(self, request: Request) -> _Viewer | None:
        if _key_from(request.headers) is not None:
            who = authenticate(self.runtime, request.headers, False)
            return None if isinstance(who, AuthFailure) else _Viewer(who, None, None)
        session_id = request.cookies.get(COOKIE)
        session = self.sessions.get(session_id, self.runtime.policy)
        if session is not None:
            return _Viewer(session.principal, session, session_id)
        return _Viewer("anonymous", None, None) if self.insecure_anonymous else None

    def _unsigned(self, request: Request) -> Response:
        if request.method == "GET":
            target = "/ui/signin?" + urlencode({"next": request.url.path})
            return _secured(RedirectResponse(target, status_code=303))
        return self.page(request, "error.html", None, status=401, message="sign in first: no session or API key")

    def _forbidden(self, request: Request, viewer: _Viewer, scope: str) -> Response:
        message = f"principal {viewer.principal!r} lacks the scope {scope!r} this page needs"
        return self.page(request, "error.html", viewer, status=403, message=message)

    def _holds(self, viewer: _Viewer, scope: str) -> bool:
        return scope in self.runtime.policy.scopes_of(viewer.principal)

    async def _form(self, request: Request, viewer: _Viewer | None, expected: str | None) -> dict[str, str] | Response:
        """The posted form's fields, or the 403 a cross-site or token-less post gets."""
        origin = request.headers.get("origin")
        if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
            return self.page(request, "error.html", viewer, status=403, message="a form posted from another site")
        body = (await request.body())[: 64 * 1024].decode("utf-8", "replace")
        form = {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}
        if expected is not None and not same_token(form.get("csrf"), expected):
            message = "the form's CSRF token is missing or wrong"
            return self.page(request, "error.html", viewer, status=403, message=message)
        return form

    async def _posted(self, request: Request, viewer: _Viewer) -> dict[str, str] | Response:
        # A key in a header cannot be sent by another site's page: only a session's forms need the token.
        return await self._form(request, viewer, viewer.session.csrf if viewer.session is not None else None)

    def page(
        self, request: Request, name: str, viewer: _Viewer | None, *, status: int = 200, **values: Any
    ) -> Response:
        template = self.templates.get_template(name)
        html = template.render(viewer=viewer, path=request.url.path, audit_scope=AUDIT_SCOPE, **values)
        return _secured(HTMLResponse(html, status_code=status))

    # -- sign-in -------------------------------------------------------------

    async def signin_form(self, request: Request) -> Response:
        token = secrets.token_urlsafe(32)
        response = self.page(request, "signin.html", None, token=token, next=_local(request.query_params.get("next")))
        _set_cookie(request, response, SIGNIN_COOKIE, token, path="/ui/signin")
        return response

    async def signin(self, request: Request) -> Response:
        form = await self._form(request, None, request.cookies.get(SIGNIN_COOKIE) or secrets.token_hex(16))
        if isinstance(form, Response):
            return form
        key = form.get("api_key", "").strip()
        principal = self.runtime.policy.principal_for_api_key(key) if key else None
        if principal is None:
            token = secrets.token_urlsafe(32)
            response = self.page(
                request, "signin.html", None, status=401, token=token, next=_local(form.get("next")),
                message="the API key matches no principal of the policy",
            )  # fmt: skip
            _set_cookie(request, response, SIGNIN_COOKIE, token, path="/ui/signin")
            return response
        response = _secured(RedirectResponse(_local(form.get("next")), status_code=303))
        _set_cookie(request, response, COOKIE, self.sessions.start(principal, key), path="/ui")
        response.delete_cookie(SIGNIN_COOKIE, path="/ui/signin")
        return response

    async def signout(self, request: Request) -> Response:
        viewer = self._viewer(request)
        if viewer is None:
            return self._unsigned(request)
        form = await self._posted(request, viewer)
        if isinstance(form, Response):
            return form
        self.sessions.end(viewer.session_id)
        response = _secured(RedirectResponse("/ui/signin", status_code=303))
        response.delete_cookie(COOKIE, path="/ui")
        return response

    # -- pages ---------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        return _secured(RedirectResponse("/ui/tools", status_code=303))

    def _approver(self, request: Request) -> _Viewer | Response:
        """The viewer when it holds the approver scope; else the redirect, 401 or 403 to answer."""
        viewer = self._viewer(request)
        if viewer is None:
            return self._unsigned(request)
        scope = self.runtime.policy.approvals.approver_scope
        if not self._holds(viewer, scope):
            return self._forbidden(request, viewer, scope)
        return viewer

    async def approvals(self, request: Request) -> Response:
        viewer = self._approver(request)
        if isinstance(viewer, Response):
            return viewer
        offset = _int(request.query_params.get("offset"), 0)
        rows, total, mark = await self._run(functools.partial(self._pending_page, offset))
        return self.page(
            request, "approvals.html", viewer, rows=rows, total=total, offset=offset, page_rows=PAGE_ROWS,
            policy_digest=policy_digest(self.runtime), done=request.query_params.get("approved"),
            denied=request.query_params.get("denied"), mark=mark,
        )  # fmt: skip

    async def approvals_mark(self, request: Request) -> Response:
        """``{"mark": ...}``: changes whenever the pending requests do (the page's script polls it)."""
        viewer = self._approver(request)
        if isinstance(viewer, Response):
            return viewer
        mark = await self._run(self.requests.pending_mark)
        return _secured(JSONResponse({"mark": mark}))

    def _pending_page(self, offset: int) -> tuple[list[dict[str, Any]], int, str]:
        mark = self.requests.pending_mark()  # read first: a request arriving meanwhile changes it again
        pending, total = self.requests.pending_page(offset, PAGE_ROWS)
        rows = []
        for approval in pending:
            record = self.audit.for_input(approval.principal, approval.tool, approval.input_digest)
            stored = record.get("input") if record is not None else None
            text = _pretty(stored) if stored is not None else None
            if text is not None and len(text) > INPUT_CHARS:
                text = text[:INPUT_CHARS] + f"… ({len(text) - INPUT_CHARS} more characters)"
            rows.append({"approval": approval, "input": text})
        return rows, total, mark

    async def approve(self, request: Request) -> Response:
        viewer = self._approver(request)
        if isinstance(viewer, Response):
            return viewer
        form = await self._posted(request, viewer)
        if isinstance(form, Response):
            return form
        approval_id = request.path_params["approval_id"]
        if request.url.path.endswith("/deny"):
            reason = form.get("reason", "").strip()
            if not reason or len(reason) > REASON_CHARS:
                message = f"a denial needs a reason of 1 to {REASON_CHARS} characters: the caller is told it"
                return self.page(request, "error.html", viewer, status=400, message=message)
            job = functools.partial(self.runtime.deny, approval_id, principal=viewer.principal, reason=reason)
            done = "denied"
        else:
            job = functools.partial(self.runtime.approve, approval_id, principal=viewer.principal)
            done = "approved"
        try:
            await self._run(job)
        except GloveboxError as exc:  # PermissionDenied: the viewer's own request
            return self.page(request, "error.html", viewer, status=403, message=exc.message)
        except ValueError as exc:  # unknown, expired, or no longer pending (a replayed form)
            return self.page(request, "error.html", viewer, status=409, message=str(exc))
        return _secured(RedirectResponse("/ui/approvals?" + urlencode({done: approval_id}), status_code=303))

    def _auditor(self, request: Request) -> _Viewer | Response:
        viewer = self._viewer(request)
        if viewer is None:
            return self._unsigned(request)
        if not self._holds(viewer, AUDIT_SCOPE):
            return self._forbidden(request, viewer, AUDIT_SCOPE)
        return viewer

    async def audit_page(self, request: Request) -> Response:
        viewer = self._auditor(request)
        if isinstance(viewer, Response):
            return viewer
        query = request.query_params
        filters = {name: query.get(name) or None for name in ("principal", "tool", "outcome", "since", "until")}
        try:
            moments = {name: parse_since(filters[name] or "") for name in ("since", "until") if filters[name]}
        except ValueError as exc:
            message = f"{exc}".replace("--since", "the time")
            return self.page(request, "error.html", viewer, status=400, message=message)
        before = _int(query.get("before"), 0) or None
        job = functools.partial(
            self.audit.page, before=before, limit=PAGE_ROWS, since=moments.get("since"), until=moments.get("until"),
            principal=filters["principal"], tool=filters["tool"], outcome=filters["outcome"],
        )  # fmt: skip
        rows = await self._run(job)
        older = None
        if len(rows) == PAGE_ROWS:
            older = urlencode({**{k: v for k, v in filters.items() if v}, "before": rows[-1]["seq"]})
        return self.page(request, "audit.html", viewer, rows=rows, filters=filters, older=older)

    async def audit_record(self, request: Request) -> Response:
        viewer = self._auditor(request)
        if isinstance(viewer, Response):
            return viewer
        seq = request.path_params["seq"]
        rows = await self._run(functools.partial(self.audit.page, before=seq + 1, limit=1))
        if not rows or rows[0]["seq"] != seq:
            return self.page(request, "error.html", viewer, status=404, message=f"no audit record {seq}")
        return self.page(request, "record.html", viewer, record=rows[0])

    async def audit_verify(self, request: Request) -> Response:
        viewer = self._auditor(request)
        if isinstance(viewer, Response):
            return viewer
        form = await self._posted(request, viewer)
        if isinstance(form, Response):
            return form
        result = await self._run(self.audit.verify)
        return self.page(request, "verify.html", viewer, result=result)

    async def audit_export(self, request: Request) -> Response:
        viewer = self._auditor(request)
        if isinstance(viewer, Response):
            return viewer

        def lines() -> Iterator[str]:
            for record in self.audit.records():
                yield record_json(record) + "\n"

        headers = {**_HEADERS, "Content-Disposition": 'attachment; filename="audit.jsonl"'}
        return StreamingResponse(lines(), media_type="application/x-ndjson", headers=headers)

    # -- runs (code mode) ------------------------------------------------------

    def _runs_of(self) -> Any:
        """The backend's runs (``CallBackend.runs``: every backend keeps them), or None for an object without."""
        return getattr(self.runtime, "runs", None)

    def _sees_all_runs(self, viewer: _Viewer) -> bool:
        return self._holds(viewer, AUDIT_SCOPE)

    def _may_act_on(self, viewer: _Viewer, owner: str) -> bool:
        """Resume or cancel: the run's own principal, or an approver who may see every run."""
        if owner == viewer.principal:
            return True
        approver = self.runtime.policy.approvals.approver_scope
        return self._sees_all_runs(viewer) and self._holds(viewer, approver)

    def _no_run(self, request: Request, viewer: _Viewer, run_id: str) -> Response:
        # One answer for an unknown id and for another principal's run: the page does not say which.
        return self.page(request, "error.html", viewer, status=404, message=f"no run {run_id!r} you may see")

    async def runs_page(self, request: Request) -> Response:
        viewer = self._viewer(request)
        if viewer is None:
            return self._unsigned(request)
        runs = self._runs_of()
        every = self._sees_all_runs(viewer)
        offset = _int(request.query_params.get("offset"), 0)
        records: list[Any] = []
        if runs is not None:
            principal = None if every else viewer.principal
            job = functools.partial(runs.list, principal=principal, limit=PAGE_ROWS + 1, offset=offset)
            records = await self._run(job)
        return self.page(
            request, "runs.html", viewer, records=records[:PAGE_ROWS], more=len(records) > PAGE_ROWS,
            offset=offset, page_rows=PAGE_ROWS, every=every, kept=runs is not None,
        )  # fmt: skip

    def _visible_run(self, viewer: _Viewer, run_id: str) -> tuple[Any, Any] | None:
        """The run's record and result when the viewer may see it; None for an unknown or unseen one."""
        runs = self._runs_of()
        if runs is None or len(run_id) > 64:
            return None
        record = runs.record(run_id)
        if record is None or not (record.principal == viewer.principal or self._sees_all_runs(viewer)):
            return None
        return record, runs.show(run_id)

    def _steps(self, run_id: str) -> list[dict[str, Any]]:
        runs = self._runs_of()
        rows = []
        for step in runs.journal(run_id):
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
                "input": _clip(_pretty(request.get("input"))) if step.kind == "call" else None,
                "output": None if shown is None else _clip(_pretty(shown)),
                "error": None if not error else f"{error.get('code')}: {error.get('message')}",
            })  # fmt: skip
        return rows

    async def run_page(self, request: Request) -> Response:
        viewer = self._viewer(request)
        if viewer is None:
            return self._unsigned(request)
        run_id = request.path_params["run_id"]
        found = await self._run(functools.partial(self._visible_run, viewer, run_id))
        if found is None:
            return self._no_run(request, viewer, run_id)
        record, result = found
        steps = await self._run(functools.partial(self._steps, run_id))
        return self.page(
            request, "run.html", viewer, record=record, result=result, steps=steps,
            output=None if result.output is None else _clip(_pretty(result.output)),
            source=_clip(record.source), may_act=self._may_act_on(viewer, record.principal),
            finished=record.status in ("done", "failed", "cancelled"),
        )  # fmt: skip

    async def run_action(self, request: Request) -> Response:
        viewer = self._viewer(request)
        if viewer is None:
            return self._unsigned(request)
        form = await self._posted(request, viewer)
        if isinstance(form, Response):
            return form
        run_id = request.path_params["run_id"]
        found = await self._run(functools.partial(self._visible_run, viewer, run_id))
        if found is None:
            return self._no_run(request, viewer, run_id)
        record, _ = found
        cancel = request.url.path.endswith("/cancel")
        if not self._may_act_on(viewer, record.principal):
            scope = self.runtime.policy.approvals.approver_scope
            message = (
                f"principal {viewer.principal!r} may not {'cancel' if cancel else 'resume'} another principal's"
                f" run: that takes the scopes {AUDIT_SCOPE!r} and {scope!r}"
            )
            return self.page(request, "error.html", viewer, status=403, message=message)
        runs = self._runs_of()
        if cancel:
            if record.status in ("done", "failed", "cancelled"):
                return self.page(request, "error.html", viewer, status=409, message=f"run {run_id!r} has finished")
            await self._run(functools.partial(runs.cancel, run_id, by=viewer.principal))  # who pressed Cancel
        else:
            if record.status != "paused":
                message = f"run {run_id!r} is {record.status}: only a paused run resumes"
                return self.page(request, "error.html", viewer, status=409, message=message)
            # The nested calls stay the run's principal's; who pressed Resume is recorded.
            result = await self._run(functools.partial(runs.resume, run_id, by=viewer.principal))
            if result.error is not None and result.error.code == "run_busy":
                return self.page(request, "error.html", viewer, status=409, message=result.error.message)
        return _secured(RedirectResponse(f"/ui/runs/{run_id}", status_code=303))

    async def tools(self, request: Request) -> Response:
        viewer = self._viewer(request)
        if viewer is None:
            return self._unsigned(request)
        infos = await self._run(functools.partial(self.runtime.visible_tools, viewer.principal))
        recent = await self._run(functools.partial(self._recent_outcomes, infos))
        return self.page(request, "tools.html", viewer, tools=infos, recent=recent)

    def _recent_outcomes(self, infos: list[Any]) -> dict[str, list[tuple[str, str]]]:
        """Each tool's last :data:`RECENT_CALLS` outcomes, newest first (through the audit's tool index)."""
        refs = [f"{info.name}@{info.version}" for info in infos]
        return {ref: self.audit.last_outcomes(ref, RECENT_CALLS) for ref in refs}

    async def health(self, request: Request) -> Response:
        viewer = self._auditor(request)
        if isinstance(viewer, Response):
            return viewer
        _, pending = await self._run(functools.partial(self.requests.pending_page, 0, 1))
        breakers = await self._run(self.runtime.breakers)
        now = datetime.now(UTC)
        since = now - timedelta(minutes=_charts.WINDOW_MIN)
        rows = await self._run(functools.partial(self.audit.since, since, limit=_charts.MAX_ROWS))
        data = _charts.minutes(rows, now, capped=len(rows) == _charts.MAX_ROWS)
        facts = {
            "policy digest": policy_digest(self.runtime),
            "policy error": self.runtime.policy_error or "none",
            "calls in flight": self.runtime.in_flight,
            "calls queued": self.runtime.queued,
            "sandbox instances live": self.runtime.live_instances,
            "approvals pending": pending,
        }
        return self.page(
            request, "health.html", viewer, facts=facts, breakers=breakers, minutes=data,
            outcomes_svg=_charts.outcomes_svg(data), latency_svg=_charts.latency_svg(data),
            totals=_charts.outcome_totals(data), shade=_charts.shade, window=_charts.WINDOW_MIN,
        )  # fmt: skip


def _secured(response: Response) -> Response:
    response.headers.update(_HEADERS)
    return response


def _set_cookie(request: Request, response: Response, name: str, value: str, *, path: str) -> None:
    secure = request.url.scheme == "https"
    response.set_cookie(name, value, path=path, httponly=True, samesite="strict", secure=secure)


def _local(target: str | None) -> str:
    """``target`` when it is a console path, else the tools page (no open redirect)."""
    if target and target.startswith("/ui/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/ui/tools"


def _clip(text: str) -> str:
    """``text`` cut to :data:`STEP_CHARS`, saying how much more there was."""
    if len(text) <= STEP_CHARS:
        return text
    return text[:STEP_CHARS] + f"… ({len(text) - STEP_CHARS} more characters)"


def _int(text: str | None, default: int) -> int:
    return int(text) if text is not None and text.isdigit() and len(text) < 19 else default


def console_routes(
    runtime: CallBackend, pool: ThreadPoolExecutor, insecure_anonymous: bool
) -> tuple[list[BaseRoute], Callable[[], None]]:
    """The console's routes, to add to the HTTP API's app, and what releases what they hold."""
    console = _Console(runtime, pool, insecure_anonymous)
    return [
        Route("/ui", console.index, methods=["GET"]),
        Route("/ui/signin", console.signin_form, methods=["GET"]),
        Route("/ui/signin", console.signin, methods=["POST"]),
        Route("/ui/signout", console.signout, methods=["POST"]),
        Route("/ui/approvals", console.approvals, methods=["GET"]),
        Route("/ui/approvals/mark", console.approvals_mark, methods=["GET"]),
        Route("/ui/approvals/{approval_id}/approve", console.approve, methods=["POST"]),
        Route("/ui/approvals/{approval_id}/deny", console.approve, methods=["POST"]),
        Route("/ui/audit", console.audit_page, methods=["GET"]),
        Route("/ui/audit/export.jsonl", console.audit_export, methods=["GET"]),
        Route("/ui/audit/verify", console.audit_verify, methods=["POST"]),
        Route("/ui/audit/{seq:int}", console.audit_record, methods=["GET"]),
        Route("/ui/runs", console.runs_page, methods=["GET"]),
        Route("/ui/runs/{run_id}", console.run_page, methods=["GET"]),
        Route("/ui/runs/{run_id}/resume", console.run_action, methods=["POST"]),
        Route("/ui/runs/{run_id}/cancel", console.run_action, methods=["POST"]),
        Route("/ui/tools", console.tools, methods=["GET"]),
        Route("/ui/health", console.health, methods=["GET"]),
        Mount("/ui/static", app=StaticFiles(directory=str(_UI / "static")), name="console-static"),
    ], console.close
