"""Calls beyond one thread: ``ProcessPool`` (N worker processes) and Ray replicas.

- :mod:`._procpool` / :mod:`._procworker` — the parent and the worker process.
- :mod:`._procwire` — what the parent sends a worker: requests as JSON text, never a pickle.
- :mod:`._raycluster` / :mod:`._rayreplica` — ``RayRuntime`` and its actors
  (public as :mod:`glovebox.ray`).
- :mod:`._raylane` — a replica's lane: calls from a driver on its node over a Unix socket.

Imports: :mod:`glovebox.runtime` (through its internal object) and below.
"""
