"""``Breakers``: fail fast (``circuit_open``) while the tool's circuit, or its one host's, is open;
tell the tool's breaker how the call went (see ``glovebox.guards``)."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from ...core._errors import CallError
from ...guards import BreakerBoard
from ...model._result import CallResult
from ...policy._guards import Breaker
from .._call import Call, Handler

__all__ = ["Breakers"]


class Breakers(Handler):
    """Checks the breakers the policy's guards name before the call runs, and reports its outcome."""

    __slots__ = ("_board",)

    def __init__(self, board: Callable[[], BreakerBoard]) -> None:
        super().__init__()
        self._board = board  # the home's breakers, opened on first need

    def handle(self, call: Call) -> CallResult:
        next = self.next
        state = call.state
        assert state is not None and state.decision is not None
        breaker = state.decision.guards.breaker
        if breaker is None:
            return next(call)
        info = state.info
        assert info is not None
        board = self._board()
        tool_breaker = "tool" in breaker.scopes
        if tool_breaker:
            board.check("tool", info.name, breaker)
            state.trace.breaker = (info.name, breaker)
        operation = info.manifest.operation
        if "host" in breaker.scopes and operation is not None:  # the one host it calls is known before it runs
            host = urlsplit(operation.url).hostname
            if host and board.check("host", host, breaker):
                state.trace.probing = {host}
        if not tool_breaker:
            return next(call)
        try:
            result = next(call)
        except Exception as error:
            self._report(board, info.name, breaker, error.code if isinstance(error, CallError) else "internal_error")
            raise
        self._report(board, info.name, breaker, None if result.ok else result.code)
        return result

    @staticmethod
    def _report(board: BreakerBoard, name: str, breaker: Breaker, code: str | None) -> None:
        """A success, a failure the breaker counts, or neither."""
        if code is None:
            board.record("tool", name, breaker, failed=False)
        elif code in breaker.count:
            board.record("tool", name, breaker, failed=True)
