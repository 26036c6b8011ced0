"""The console's tools page: what the viewer may see, each with its last calls' outcomes (any principal)."""

from __future__ import annotations

import functools
from typing import Any

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ._refusals import requires
from ._uibase import ConsoleState

__all__ = ["RECENT_CALLS", "ToolPages"]

#: Outcomes of a tool's last calls shown on the tools page.
RECENT_CALLS = 10


class ToolPages:
    """``GET /ui/tools``."""

    def __init__(self, ui: ConsoleState) -> None:
        self.ui = ui

    def routes(self, viewers: list[Middleware], forms: list[Middleware]) -> list[BaseRoute]:
        return [Route("/ui/tools", self.tools, methods=["GET"], middleware=viewers)]

    @requires()
    async def tools(self, request: Request) -> Response:
        infos = await self.ui.run(functools.partial(self.ui.runtime.visible_tools, request.user.identity))
        recent = await self.ui.run(functools.partial(self._recent_outcomes, infos))
        return self.ui.page(request, "tools.html", tools=infos, recent=recent)

    def _recent_outcomes(self, infos: list[Any]) -> dict[str, list[tuple[str, str]]]:
        """Each tool's last :data:`RECENT_CALLS` outcomes, newest first (through the audit's tool index)."""
        refs = [f"{info.name}@{info.version}" for info in infos]
        return {ref: self.ui.audit.last_outcomes(ref, RECENT_CALLS) for ref in refs}
