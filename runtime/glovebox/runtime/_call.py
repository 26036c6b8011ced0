"""A call as one object: the request that flows down the handler chain, and the chain itself.

A :class:`Call` is made once per ``Runtime.call`` and never changed (it is a
named tuple): a handler that needs to say something new about it (its tracer,
its attempts, the state of one attempt) hands the next handler a copy
(``call._replace(...)``). Each handler is a small class with one method,
``handle(call) -> CallResult``, that does its part before and/or after passing
the call to ``self.next``, the rest of the chain (see :mod:`glovebox.runtime.handlers`);
:func:`compose` strings them together in the order the Runtime lists them,
ending in the terminal step that hands the call to an executor
(:mod:`glovebox.runtime.executors`).

Inside one attempt, the handlers below the audit handler learn things the later
ones need: which tool version the name resolved to, the policy's decision, the
input's text as the tool receives it. They write them on the attempt's
:class:`CallState` (the one mutable part, made fresh per attempt) and refuse a
call by raising a :class:`~glovebox.core._errors.CallError`, which the audit
handler turns into the envelope, once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from ..model._grants import Grants
    from ..model._result import CallResult, ToolInfo
    from ..policy import Decision
    from ._gate import CallTrace
    from ._retry import Attempts

__all__ = ["Call", "CallState", "Handler", "Next", "compose"]


class Call(NamedTuple):
    """One call of a tool, as the chain passes it from handler to handler."""

    #: The tool as the caller named it: ``name`` or ``name@version``.
    tool: str
    #: The JSON value the caller gave.
    input: Any
    #: Who calls (None: ``anonymous``).
    principal: str | None
    #: The call id chosen before the call reached this Runtime (a pool's dispatch), else None: one is made.
    call_id: str | None = None
    #: When the call was admitted (``time.perf_counter``); set by the compute handler.
    started: float = 0.0
    #: The OpenTelemetry tracer of this call, when it is traced.
    tracer: Any = None
    #: Where the call's ``glovebox.call`` span goes when the caller asked for it (a pool's worker).
    spans: list[Any] | None = None
    #: The attempts of this call (retries, fallbacks, deadlines); set by the attempts handler.
    attempts: Attempts | None = None
    #: What one attempt has learned so far; set by the audit handler.
    state: CallState | None = None

    # The copies the chain's own handlers make on every call, built without ``_replace``'s generality.

    def started_at(self, started: float) -> Call:
        """This call, admitted at ``started`` (``time.perf_counter``)."""
        t, i, p, c, _, tr, sp, a, st = self
        return _new(Call, (t, i, p, c, started, tr, sp, a, st))

    def attempted(self, attempts: Attempts) -> Call:
        """This call, under ``attempts``."""
        t, i, p, c, s, tr, sp, _, st = self
        return _new(Call, (t, i, p, c, s, tr, sp, attempts, st))

    def in_state(self, state: CallState) -> Call:
        """This call, for the attempt whose state is ``state``."""
        t, i, p, c, s, tr, sp, a, _ = self
        return _new(Call, (t, i, p, c, s, tr, sp, a, state))


_new = tuple.__new__


@dataclasses.dataclass(slots=True)
class CallState:
    """What one attempt of a call learns on its way down the chain (fresh per attempt)."""

    #: The envelope's ``meta`` as it is filled in.
    meta: dict[str, Any]
    #: What the audit row needs besides the result (decision, approval, quota, breaker).
    trace: CallTrace
    #: The input's JSON text and UTF-8 size, made once at the door (None: not JSON).
    encoded: tuple[str, int] | None = None
    #: The tool version the name resolved to.
    info: ToolInfo | None = None
    #: The policy's decision for this attempt (its limits cut to the time left).
    decision: Decision | None = None
    #: What the call is granted: the policy's grants, or with no policy the Runtime's.
    grants: Grants | None = None
    #: The input's text as the tool receives it (validated).
    input_text: str | None = None
    #: The tool's output text, as the executor returned it.
    output_text: str | None = None

    def resolved(self) -> tuple[ToolInfo, Decision]:
        """The tool and the decision, for a handler that runs after both are known."""
        assert self.info is not None and self.decision is not None, "the chain's order is wrong"
        return self.info, self.decision


#: The rest of the chain, as one handler sees it.
Next = Callable[[Call], "CallResult"]


class Handler:
    """One step of the call pipeline: do something before and/or after the rest of the chain.

    ``handle(call)`` answers the call, usually by passing it (or a copy) to ``self.next``,
    the rest of the chain, which :func:`compose` sets (a handler belongs to one chain).
    """

    __slots__ = ("next",)

    def __init__(self) -> None:
        self.next: Next = _unchained

    def handle(self, call: Call) -> CallResult:
        """Answer ``call``."""
        raise NotImplementedError


def compose(handlers: Sequence[Handler], last: Next) -> Next:
    """The chain ``handlers[0] → handlers[1] → … → last`` as one callable (each handler's ``next`` set)."""
    chain = last
    for handler in reversed(handlers):
        handler.next = chain
        chain = handler.handle  # a bound method: one frame a step, nothing wrapped around it
    return chain


def _unchained(call: Call) -> CallResult:
    raise RuntimeError("this handler is not in a chain: compose() sets what comes next")
