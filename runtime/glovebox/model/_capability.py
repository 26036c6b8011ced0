"""Capabilities as plug-ins: the base class and the registry every layer loops over.

A capability (the built-in ``http``, ``sql`` and ``kv``, or a third party's) is one
instance of a :class:`Capability` subclass, and it declares everything the host
needs to know about it:

- ``name`` (its key in manifests, grants and the audit row), ``interface`` (its WIT
  interface, ``glovebox:tool/NAME@0.1.0``) and ``wit`` (that interface's text);
- :meth:`~Capability.manifest_fields`, :meth:`~Capability.grant_fields` and
  :meth:`~Capability.policy_fields`: the pydantic fields it adds to a manifest's
  ``capabilities``, to a call's effective ``Grants`` and to a policy's ``grants`` entry;
- :meth:`~Capability.combine`: the effective grant of the policy entries that match a call;
- :meth:`~Capability.functions`: its host functions by name (how their values are
  read, answered and written, see :class:`HostFunction`);
- :meth:`~Capability.bind`: the per-call object (what the manifest declares ∩ what
  the call was granted), or None when the call has none of it;
- :meth:`~Capability.egress`: its part of the audit row's ``egress``.

Registration is the same for built-ins and third parties (datasette's
``DEFAULT_PLUGINS``): :data:`DEFAULT_CAPABILITIES` names the built-ins as
``module:attribute`` entry points, and a distribution adds its own under the
entry-point group ``glovebox.capabilities`` (read with :mod:`importlib.metadata`).
Entry points name their object, so this module imports no capability statically:
the layers stay as they are (a capability imports the model, never the reverse).
The registry is read once per process; names are unique.

Imports: :mod:`glovebox.core` only (and, by name, the registered capabilities).
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_CAPABILITIES",
    "ENTRY_POINT_GROUP",
    "Capability",
    "HostFunction",
    "registered",
]

#: The entry-point group a distribution registers its capabilities under.
ENTRY_POINT_GROUP = "glovebox.capabilities"

#: The built-in capabilities, as entry-point values (read like a third party's).
DEFAULT_CAPABILITIES = (
    "glovebox.capabilities.http:CAPABILITY",
    "glovebox.capabilities.sql:CAPABILITY",
    "glovebox.capabilities.kv:CAPABILITY",
    "glovebox.capabilities.files:CAPABILITY",
    "glovebox.capabilities.client:CAPABILITY",
)

#: A pydantic field: its type and its default (or a ``pydantic.Field``).
FieldSpec = tuple[Any, Any]


@dataclass(frozen=True)
class HostFunction:
    """One host function of a capability, as the one generic trampoline runs it.

    ``lift(args, count)`` reads the guest's values (raising ``WrongShape`` for values of
    other types than the world's: the guest traps); ``answer(state, *values)`` answers
    for the call on this thread (``state`` is None outside a call) and never needs to
    raise; ``lower(answer, slot)`` writes the answer (None: the function returns
    nothing); ``fallback`` is what is written when ``answer`` raised anyway.
    """

    name: str
    lift: Callable[[Any, int], tuple[Any, ...]]
    answer: Callable[..., Any]
    lower: Callable[[Any, Any], None] | None
    fallback: Any = None

    @property
    def results(self) -> int:
        """How many results the function returns (0 or 1)."""
        return 0 if self.lower is None else 1


class Capability:
    """The base class of a capability; subclass it and register an instance."""

    #: Its key in manifests, grants, the call's state and the audit row.
    name: str = ""
    #: The WIT interface its host functions belong to (``glovebox:tool/NAME@0.1.0``);
    #: empty for a capability without host functions (``files``: WASI is its interface).
    interface: str = ""
    #: The WIT text of that interface (documentation, and the build's world).
    wit: str = ""

    def manifest_fields(self) -> Mapping[str, FieldSpec]:
        """Fields added to a manifest's ``capabilities`` table (what a tool declares)."""
        return {}

    def grant_fields(self) -> Mapping[str, FieldSpec]:
        """Fields added to a call's effective ``Grants``."""
        return {}

    def policy_fields(self) -> Mapping[str, FieldSpec]:
        """Fields added to a policy's ``grants`` entry (default: the grant fields)."""
        return self.grant_fields()

    def combine(self, entries: Sequence[Any]) -> dict[str, Any]:
        """The effective grant (its grant fields) from the matching policy entries: lists add up."""
        return {key: [item for entry in entries for item in getattr(entry, key)] for key in self.grant_fields()}

    def functions(self) -> Sequence[HostFunction]:
        """Its host functions, all in :attr:`interface`."""
        return ()

    def bind(self, declared: Any, grants: Any, context: Any) -> Any:
        """The per-call object (declared ∩ granted), or None: its host functions then answer ``denied``."""
        return None

    def finish(self, bound: Any, trace: Any) -> None:
        """After the call: release what ``bound`` holds and hand the caller what it must keep."""
        close = getattr(bound, "close", None)
        if close is not None:
            close()

    def egress(self, meta: Mapping[str, Any], *, store_inputs: bool, extras: Mapping[str, Any]) -> Any:
        """Its part of the audit row's ``egress`` (from the envelope's ``meta``), or None."""
        return meta.get(self.name)


_lock = threading.Lock()
_registry: tuple[Capability, ...] | None = None


def registered() -> tuple[Capability, ...]:
    """Every registered capability, built-ins first, in a stable order."""
    global _registry
    if _registry is None:
        with _lock:
            if _registry is None:
                _registry = _load([*DEFAULT_CAPABILITIES, *_entry_points()])
    return _registry


def _entry_points() -> list[str]:
    """The values of the group's entry points in the distributions on ``sys.path``, in path order.

    ``importlib.metadata.entry_points`` reads every distribution's metadata (a tenth of
    a second in a large environment, at every ``import glovebox``); this reads only the
    ``entry_points.txt`` files, and parses just those naming the group.
    """
    from importlib.metadata import PathDistribution

    found: list[str] = []
    for entry in sys.path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            folder = Path(entry or ".") / name
            try:
                text = (folder / "entry_points.txt").read_text(encoding="utf-8")
            except OSError:
                continue
            if f"[{ENTRY_POINT_GROUP}]" not in text:
                continue
            for point in PathDistribution(folder).entry_points.select(group=ENTRY_POINT_GROUP):
                if point.value not in found and point.value not in DEFAULT_CAPABILITIES:
                    found.append(point.value)
    return found


def _load(values: Sequence[str]) -> tuple[Capability, ...]:
    found: dict[str, Capability] = {}
    for value in values:
        module, _, attribute = value.partition(":")
        capability = getattr(importlib.import_module(module), attribute or "CAPABILITY")
        if not isinstance(capability, Capability) or not capability.name:
            raise TypeError(f"entry point {value!r} is not a named glovebox Capability")
        if capability.name in found:
            raise ValueError(f"two capabilities are named {capability.name!r} ({value!r})")
        found[capability.name] = capability
    return tuple(found.values())
