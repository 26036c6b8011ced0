"""Binding the registered capabilities for one call: what the manifest declares ∩ what the call was granted.

:func:`bind_capabilities` is the one thing a caller (the Runtime) does with
capabilities before a call: it asks every registered capability
(``glovebox.model._capability``) for its per-call object and hands the result to
``Sandbox.run``; after the call it closes them (:meth:`BoundCapabilities.close`)
and copies what their host functions recorded into the envelope's meta
(:meth:`BoundCapabilities.record`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model._capability import Capability, registered

__all__ = ["BoundCapabilities", "CapabilityContext", "bind_capabilities"]


@dataclass(frozen=True)
class CapabilityContext:
    """What binding a capability for one call may need beyond the manifest and the grants.

    The factories are called only by a capability the call was granted (so a call
    without HTTP never opens the breaker board).
    """

    home: Path
    principal: str
    tracer: Any = None
    #: The injected HTTP transport (``httpx.MockTransport`` in tests), or None.
    transport: Any = None
    #: The per-host breakers of this call (``glovebox.guards.HostBreakers``), or None.
    hosts: Callable[[], Any] | None = None
    #: The gate's approver of SQL statements for this call, or None.
    statement_approver: Callable[[], Any] | None = None


class BoundCapabilities(dict[str, Any]):
    """The capabilities of one call by name (only those it was granted); what ``Sandbox.run`` takes."""

    def __init__(self, bound: dict[str, Any], capabilities: dict[str, Capability]) -> None:
        super().__init__(bound)
        self._capabilities = capabilities

    def close(self, trace: Any = None) -> None:
        """Release what each holds (connections) and hand ``trace`` what the audit keeps (SQL parameters)."""
        for name, bound in self.items():
            self._capabilities[name].finish(bound, trace)

    @staticmethod
    def record(meta: dict[str, Any], state: Any) -> None:
        """Put what capabilities recorded in the call's state (``state.records``) into ``meta``, by name."""
        for name, entries in state.records.items():
            meta[name] = entries
        if state.records_dropped:
            meta["records_dropped"] = state.records_dropped


def bind_capabilities(declared: Any, grants: Any, context: CapabilityContext) -> BoundCapabilities:
    """Every registered capability the call has: its manifest's ``capabilities`` ∩ its ``grants``."""
    capabilities = {capability.name: capability for capability in registered()}
    bound = {}
    for name, capability in capabilities.items():
        value = capability.bind(declared, grants, context)
        if value is not None:
            bound[name] = value
    return BoundCapabilities(bound, capabilities)
