"""``open_backend``: the one place a call backend is chosen by name.

The CLI's ``--backend``, ``--processes``, ``--replicas`` and ``--address`` map
onto these arguments and nothing else, so a Python program can ask for
anything ``glovebox serve`` can.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ..policy import Policy
    from ..runtime._backend import CallBackend

__all__ = ["BACKENDS", "RAY_THREADS", "open_backend"]

#: The names :func:`open_backend` takes.
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
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose local, processes or ray")
    _refuse_foreign(backend, processes=processes, threads=threads, replicas=replicas, address=address)
    if backend == "local":
        from ..runtime._runtime import Runtime

        return Runtime(home, policy, **options)
    if backend == "processes":
        from ._procpool import ProcessPool

        return ProcessPool(processes, home, policy, threads=threads or 4, **options)
    from ..ray import RayRuntime

    return RayRuntime(replicas or 2, address, home, policy, threads=threads or RAY_THREADS, **options)


_TAKES = {"local": set(), "processes": {"processes", "threads"}, "ray": {"threads", "replicas", "address"}}


def _refuse_foreign(backend: str, **given: Any) -> None:
    for name, value in given.items():
        if value is not None and name not in _TAKES[backend]:
            raise ValueError(f"{name} is not an option of the {backend} backend")
