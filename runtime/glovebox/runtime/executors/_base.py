"""``Executor``: the seam between the handler chain and whatever runs a tool."""

from __future__ import annotations

from collections.abc import Mapping

from .._call import Call

__all__ = ["Executor", "Executors"]


class Executor:
    """Runs the tool of an admitted call (``call.state`` holds its tool, decision, grants and input text).

    An executor answers the tool's output as JSON text, or raises a
    ``CallError`` (``timeout``, ``guest_trap``, ``upstream_error``...) that the
    audit handler turns into the envelope. It writes what the run used
    (``fuel_used``, egress, logs) into ``call.state.meta``. It never writes an
    audit row and never decides anything the policy decides.
    """

    def execute(self, call: Call) -> str:
        """The tool's output text."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the executor holds. Idempotent."""


class Executors:
    """The executor of each tool kind, with a default for the kinds not named."""

    __slots__ = ("_by_kind", "default")

    def __init__(self, default: Executor, by_kind: Mapping[str, Executor] | None = None) -> None:
        self.default = default
        self._by_kind = dict(by_kind or {})

    def for_kind(self, kind: str) -> Executor:
        """The executor that runs tools of ``kind``."""
        return self._by_kind.get(kind, self.default)

    def close(self) -> None:
        """Close every executor once."""
        closed: set[int] = set()
        for executor in (self.default, *self._by_kind.values()):
            if id(executor) not in closed:
                closed.add(id(executor))
                executor.close()
