"""``open_backend``: the one place a call backend is chosen by name.

The CLI's ``--backend``, ``--processes``, ``--replicas`` and ``--address`` map
onto these arguments and nothing else, so a Python program can ask for
anything ``glovebox serve`` can.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ..policy import Policy
    from ..runtime._backend import CallBackend

__all__ = ["BACKENDS", "RAY_THREADS", "open_backend"]

#: The names :func:`open_backend` takes (the table at the end of this module says what each opens).
BACKENDS = ("local", "processes", "ray")
#: Calls a Ray replica runs at once unless ``threads`` says otherwise.
RAY_THREADS = 16

BackendName = Literal["local", "processes", "ray"]


def open_backend(
    backend: BackendName = "local",
    home: str | os.PathLike[str] | None = None,
    policy: str | os.PathLike[str] | Policy | None = None,
    *,
    processes: int | None = None,
    threads: int | None = None,
    replicas: int | None = None,
    address: str | None = None,
    **options: Any,
) -> CallBackend:
    """Open a call backend on ``home`` under ``policy``; every one implements ``CallBackend``.

    Args:
        backend: ``local`` (a :class:`~glovebox.Runtime`: calls on threads of this
            process), ``processes`` (a :class:`~glovebox.ProcessPool` of
            ``processes`` workers, default the CPU count) or ``ray`` (a
            ``glovebox.ray.RayRuntime`` of ``replicas`` actors, default 2, on the
            cluster at ``address``; needs the ``ray`` extra).
        home: as for :class:`~glovebox.Runtime`.
        policy: as for :class:`~glovebox.Runtime`.
        processes: worker processes (``processes`` only).
        threads: calls a worker or replica runs at once (default 4 per worker,
            ``RAY_THREADS`` per replica).
        replicas: Ray replicas (``ray`` only).
        address: the Ray cluster to join (``ray`` only; default: the one this
            process joined, else a local one).
        **options: the other keyword arguments of :class:`~glovebox.Runtime`
            (``max_in_flight``, ``max_queued``, ``max_running``, ``grants``, ...),
            given to every Runtime the backend opens.

    Raises:
        ValueError: an unknown backend, or an option another backend takes
            (``replicas`` with ``processes``, say).
        ImportError: ``ray`` without the ``ray`` extra.

    >>> open_backend("threads")
    Traceback (most recent call last):
    ...
    ValueError: unknown backend 'threads'; choose local, processes or ray
    """
    chosen = _BACKENDS.get(backend)
    if chosen is None:
        raise ValueError(f"unknown backend {backend!r}; choose {', '.join(BACKENDS[:-1])} or {BACKENDS[-1]}")
    given = {"processes": processes, "threads": threads, "replicas": replicas, "address": address}
    for name, value in given.items():
        if value is not None and name not in chosen.takes:
            raise ValueError(f"{name} is not an option of the {backend} backend")
    return chosen.open(home, policy, given, options)


def _local(home: Any, policy: Any, given: dict[str, Any], options: dict[str, Any]) -> CallBackend:
    from ..runtime._runtime import Runtime

    return Runtime(home, policy, **options)


def _processes(home: Any, policy: Any, given: dict[str, Any], options: dict[str, Any]) -> CallBackend:
    from ._procpool import ProcessPool

    return ProcessPool(given["processes"], home, policy, threads=given["threads"] or 4, **options)


def _ray(home: Any, policy: Any, given: dict[str, Any], options: dict[str, Any]) -> CallBackend:
    from ..ray import RayRuntime

    threads = given["threads"] or RAY_THREADS
    return RayRuntime(given["replicas"] or 2, given["address"], home, policy, threads=threads, **options)


@dataclass(frozen=True)
class _Backend:
    """A backend :func:`open_backend` knows: the options it takes beside the Runtime's, and how it opens."""

    takes: frozenset[str]
    open: Callable[[Any, Any, dict[str, Any], dict[str, Any]], CallBackend]


_BACKENDS = {
    "local": _Backend(frozenset(), _local),
    "processes": _Backend(frozenset({"processes", "threads"}), _processes),
    "ray": _Backend(frozenset({"threads", "replicas", "address"}), _ray),
}
