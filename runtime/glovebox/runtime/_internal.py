"""What the importers use of a Runtime beyond its public API: its registry and registrar.

An import writes many tool versions (and their descriptors) in one
transaction, which ``Runtime.register`` cannot say. The importers get a
:class:`RuntimeInternals` from :func:`internals` and use nothing else of the
Runtime that is private: a test walks every module and fails on any access to
a private attribute of a Runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..registry._registration import Registrar
    from ..registry._registry import Registry
    from ._runtime import Runtime

__all__ = ["RuntimeInternals", "internals"]


class RuntimeInternals:
    """A narrow view of one Runtime's registry (see the module docstring)."""

    __slots__ = ("_runtime",)

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    @property
    def registry(self) -> Registry:
        """The Runtime's registry (its index and blobs)."""
        return self._runtime._registry

    @property
    def registrar(self) -> Registrar:
        """What registers artifacts on this Runtime's engine (made on first need)."""
        return self._runtime._registrar

    def check_open(self) -> None:
        """Raise ValueError when the Runtime is closed."""
        self._runtime._check_open()


def internals(runtime: Runtime) -> RuntimeInternals:
    """The internal interface of ``runtime``."""
    return RuntimeInternals(runtime)
