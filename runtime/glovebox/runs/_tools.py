"""The tools a run's program sees: their names, a search over them, and a nested call of one.

A tool the run's principal cannot see does not exist for its program: a call of
one answers ``tool_not_found`` naming only the tools it may see, as
``Runtime.call`` does, and leaves its audit row.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ..core._errors import ToolNotFound
from ..model._result import CallResult, ToolInfo
from ._env import RunEnvironment

__all__ = ["ProgramTools", "search_tools"]

_VISIBLE_TTL_S = 1.0  # how long a principal's visible names are kept (a run's calls ask again and again)
_VISIBLE_KEPT = 256  # principals whose names are kept


class ProgramTools:
    """The tools of the programs run in ``env`` (see the module docstring)."""

    def __init__(self, env: RunEnvironment) -> None:
        self._env = env
        self._lock = threading.Lock()
        self._visible: dict[str, tuple[float, list[str]]] = {}

    def names(self, principal: str) -> list[str]:
        """The names ``principal`` may see, sorted (kept for a second)."""
        now = time.monotonic()
        with self._lock:
            kept = self._visible.get(principal)
            if kept is not None and now - kept[0] < _VISIBLE_TTL_S:
                return kept[1]
        names = sorted(info.name for info in self._env.visible_tools(principal))
        with self._lock:
            self._visible[principal] = (now, names)
            if len(self._visible) > _VISIBLE_KEPT:
                self._visible.pop(next(iter(self._visible)))
        return names

    def search(self, query: str, principal: str) -> list[dict[str, Any]]:
        """What ``tools.search(query)`` answers a program of ``principal``."""
        return search_tools(self._env.visible_tools(principal), query)

    def call(self, tool: str, input: Any, principal: str, call_id: str, run: dict[str, Any]) -> CallResult:
        """A full call of ``principal``; a tool it cannot see does not exist (as in ``tool_not_found``)."""
        visible = self.names(principal)
        if tool.partition("@")[0] not in visible:
            missing = ToolNotFound(self._env.not_found(tool, principal, visible), details={"tool": tool})
            return self._env.refuse(tool, input, principal, call_id, run, missing)
        return self._env.call(tool, input, principal, call_id, run)


def search_tools(tools: list[ToolInfo], query: str, limit: int = 20) -> list[dict[str, Any]]:
    """The tools whose name or description holds the query's words, best first (every word counts)."""
    words = [word for word in query.lower().replace("-", " ").replace("_", " ").split() if word]
    scored = []
    for info in tools:
        name = info.name.lower().replace("-", " ").replace("_", " ")
        text = f"{name} {info.description.lower()}"
        score = sum(3 if word in name else 1 for word in words if word in text)
        if score or not words:
            scored.append((-score, info.name, info))
    scored.sort(key=lambda item: (item[0], item[1]))
    return [
        {"name": info.name, "version": info.version, "description": info.description} for _, _, info in scored[:limit]
    ]
