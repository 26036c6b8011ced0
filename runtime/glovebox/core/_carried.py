"""What a call carries into the thread that runs it: the context variables its caller set for it.

``Runtime.acall`` runs a call on a worker thread. The caller's whole context must
not go there (an async framework's own variables, such as the one naming the
running event loop's library, would make the thread look like it runs a loop);
only the variables glovebox declares with :func:`carried` do: where a call's
progress and log lines go, its cancellation, the MCP client it may ask.
"""

from __future__ import annotations

import contextvars
from typing import Any, TypeVar

__all__ = ["carried", "carried_context"]

T = TypeVar("T")
_CARRIED: list[contextvars.ContextVar[Any]] = []


def carried(var: contextvars.ContextVar[T]) -> contextvars.ContextVar[T]:
    """Declare ``var`` as one a call carries into its thread; returns it."""
    _CARRIED.append(var)
    return var


def carried_context() -> contextvars.Context:
    """A fresh context holding the current values of the carried variables (those that are set)."""
    context = contextvars.Context()
    for var in _CARRIED:
        value = var.get(_UNSET)
        if value is not _UNSET:
            context.run(var.set, value)
    return context


_UNSET: Any = object()
