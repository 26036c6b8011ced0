"""The console's audit pages: the log filtered and paginated, one record, verify, export (glovebox:audit)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from ..audit._filter import parse_since
from ..audit._log import record_json
from ._refusals import BadRequest, NotFound, requires
from ._uibase import AUDIT_SCOPE, PAGE_ROWS, ConsoleState, int_param

__all__ = ["AuditPages"]

_FILTERS = ("principal", "tool", "outcome", "since", "until")


def _denial_reason(row: dict[str, Any]) -> str | None:
    """The reason an approver gave for denying the row's call (kept in ``egress.approval``), or None."""
    if row.get("decision") != "denied" or not isinstance(row.get("egress"), str):
        return None
    try:
        approval = json.loads(row["egress"]).get("approval")
    except (ValueError, AttributeError):
        return None
    reason = approval.get("reason") if isinstance(approval, dict) else None
    return reason if isinstance(reason, str) else None


class AuditPages:
    """``/ui/audit``, ``/ui/audit/{seq}``, ``/ui/audit/verify``, ``/ui/audit/export.jsonl``."""

    def __init__(self, ui: ConsoleState) -> None:
        self.ui = ui

    def routes(self, viewers: list[Middleware], forms: list[Middleware]) -> list[BaseRoute]:
        return [
            Route("/ui/audit", self.log, methods=["GET"], middleware=viewers),
            Route("/ui/audit/export.jsonl", self.export, methods=["GET"], middleware=viewers),
            Route("/ui/audit/verify", self.verify, methods=["POST"], middleware=forms),
            Route("/ui/audit/{seq:int}", self.record, methods=["GET"], middleware=viewers),
        ]

    @requires(AUDIT_SCOPE)
    async def log(self, request: Request) -> Response:
        query = request.query_params
        filters = {name: query.get(name) or None for name in _FILTERS}
        try:
            moments = {name: parse_since(filters[name] or "") for name in ("since", "until") if filters[name]}
        except ValueError as exc:
            raise BadRequest(f"{exc}".replace("--since", "the time")) from None
        before = int_param(query.get("before"), 0)
        job = functools.partial(
            self.ui.audit.page, before=before or None, limit=PAGE_ROWS, since=moments.get("since"),
            until=moments.get("until"), principal=filters["principal"], tool=filters["tool"],
            outcome=filters["outcome"],
        )  # fmt: skip
        rows = [{**row, "reason": _denial_reason(row)} for row in await self.ui.run(job)]
        older = None
        if len(rows) == PAGE_ROWS:
            older = urlencode({**{k: v for k, v in filters.items() if v}, "before": rows[-1]["seq"]})
        return self.ui.page(request, "audit.html", rows=rows, filters=filters, older=older)

    @requires(AUDIT_SCOPE)
    async def record(self, request: Request) -> Response:
        seq = request.path_params["seq"]
        rows = await self.ui.run(functools.partial(self.ui.audit.page, before=seq + 1, limit=1))
        if not rows or rows[0]["seq"] != seq:
            raise NotFound(f"no audit record {seq}")
        return self.ui.page(request, "record.html", record=rows[0])

    @requires(AUDIT_SCOPE)
    async def verify(self, request: Request) -> Response:
        result = await self.ui.run(self.ui.audit.verify)
        return self.ui.page(request, "verify.html", result=result)

    @requires(AUDIT_SCOPE)
    async def export(self, request: Request) -> Response:
        audit = self.ui.audit

        def lines() -> Iterator[str]:
            for record in audit.records():
                yield record_json(record) + "\n"

        headers = {"Content-Disposition": 'attachment; filename="audit.jsonl"'}
        return StreamingResponse(lines(), media_type="application/x-ndjson", headers=headers)
