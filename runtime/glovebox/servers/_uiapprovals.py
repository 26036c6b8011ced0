"""The console's approvals: pending requests, their mark, approve and deny (the approver scope)."""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import urlencode

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ..core._errors import GloveboxError
from ._refusals import BadRequest, Conflict, Forbidden, requires
from ._uibase import PAGE_ROWS, ConsoleState, clip, int_param, policy_digest, pretty

__all__ = ["INPUT_CHARS", "REASON_CHARS", "ApprovalPages"]

#: Characters of a stored input shown on the approvals page.
INPUT_CHARS = 2000
#: The longest reason a denial may give (it reaches the caller in the error message).
REASON_CHARS = 500


def _approver(pages: ApprovalPages) -> str:
    return pages.ui.approver_scope


class ApprovalPages:
    """``/ui/approvals``, ``/ui/approvals/mark``, ``/ui/approvals/{id}/approve|deny``."""

    def __init__(self, ui: ConsoleState) -> None:
        self.ui = ui

    def routes(self, viewers: list[Middleware], forms: list[Middleware]) -> list[BaseRoute]:
        return [
            Route("/ui/approvals", self.approvals, methods=["GET"], middleware=viewers),
            Route("/ui/approvals/mark", self.mark, methods=["GET"], middleware=viewers),
            Route("/ui/approvals/{approval_id}/approve", self.approve, methods=["POST"], middleware=forms),
            Route("/ui/approvals/{approval_id}/deny", self.deny, methods=["POST"], middleware=forms),
        ]

    @requires(_approver)
    async def approvals(self, request: Request) -> Response:
        query = request.query_params
        offset = int_param(query.get("offset"), 0)
        rows, total, mark = await self.ui.run(functools.partial(self._pending_page, offset))
        return self.ui.page(
            request, "approvals.html", rows=rows, total=total, offset=offset, page_rows=PAGE_ROWS,
            policy_digest=policy_digest(self.ui.runtime), done=query.get("approved"), denied=query.get("denied"),
            mark=mark,
        )  # fmt: skip

    @requires(_approver)
    async def mark(self, request: Request) -> Response:
        """``{"mark": ...}``: changes whenever the pending requests do (the page's script polls it)."""
        return JSONResponse({"mark": await self.ui.run(self.ui.requests.pending_mark)})

    def _pending_page(self, offset: int) -> tuple[list[dict[str, Any]], int, str]:
        requests = self.ui.requests
        mark = requests.pending_mark()  # read first: a request arriving meanwhile changes it again
        pending, total = requests.pending_page(offset, PAGE_ROWS)
        rows = []
        for approval in pending:
            record = self.ui.audit.for_input(approval.principal, approval.tool, approval.input_digest)
            stored = record.get("input") if record is not None else None
            rows.append({"approval": approval, "input": None if stored is None else clip(pretty(stored), INPUT_CHARS)})
        return rows, total, mark

    @requires(_approver)
    async def approve(self, request: Request) -> Response:
        approval_id = request.path_params["approval_id"]
        job = functools.partial(self.ui.runtime.approve, approval_id, principal=request.user.identity)
        return await self._decide(job, "approved", approval_id)

    @requires(_approver)
    async def deny(self, request: Request) -> Response:
        approval_id = request.path_params["approval_id"]
        reason = request.state.form.get("reason", "").strip()
        if not reason or len(reason) > REASON_CHARS:
            raise BadRequest(f"a denial needs a reason of 1 to {REASON_CHARS} characters: the caller is told it")
        deny = self.ui.runtime.deny
        return await self._decide(
            functools.partial(deny, approval_id, principal=request.user.identity, reason=reason), "denied", approval_id
        )

    async def _decide(self, job: functools.partial[Any], done: str, approval_id: str) -> Response:
        try:
            await self.ui.run(job)
        except GloveboxError as exc:  # PermissionDenied: the viewer's own request
            raise Forbidden(exc.message) from None
        except ValueError as exc:  # unknown, expired, or no longer pending (a replayed form)
            raise Conflict(str(exc)) from None
        return RedirectResponse("/ui/approvals?" + urlencode({done: approval_id}), status_code=303)
