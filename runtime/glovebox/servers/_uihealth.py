"""The console's health page: the policy, admission, breakers and charts of the last calls (glovebox:audit)."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ._charts import MAX_ROWS, WINDOW_MIN, latency_svg, minutes, outcome_totals, outcomes_svg, shade
from ._refusals import requires
from ._uibase import AUDIT_SCOPE, ConsoleState, policy_digest

__all__ = ["HealthPage"]


class HealthPage:
    """``GET /ui/health``."""

    def __init__(self, ui: ConsoleState) -> None:
        self.ui = ui

    def routes(self, viewers: list[Middleware], forms: list[Middleware]) -> list[BaseRoute]:
        return [Route("/ui/health", self.health, methods=["GET"], middleware=viewers)]

    @requires(AUDIT_SCOPE)
    async def health(self, request: Request) -> Response:
        ui, runtime = self.ui, self.ui.runtime
        _, pending = await ui.run(functools.partial(ui.requests.pending_page, 0, 1))
        breakers = await ui.run(runtime.breakers)
        now = datetime.now(UTC)
        rows = await ui.run(functools.partial(ui.audit.since, now - timedelta(minutes=WINDOW_MIN), limit=MAX_ROWS))
        data = minutes(rows, now, capped=len(rows) == MAX_ROWS)
        facts = {
            "policy digest": policy_digest(runtime),
            "policy error": runtime.policy_error or "none",
            "calls in flight": runtime.in_flight,
            "calls queued": runtime.queued,
            "sandbox instances live": runtime.live_instances,
            "approvals pending": pending,
        }
        return ui.page(
            request, "health.html", facts=facts, breakers=breakers, minutes=data, outcomes_svg=outcomes_svg(data),
            latency_svg=latency_svg(data), totals=outcome_totals(data), shade=shade, window=WINDOW_MIN,
        )  # fmt: skip
