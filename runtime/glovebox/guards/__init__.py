"""Guards' shared state: the circuit breakers of one home.

- :mod:`._breakers` — ``BreakerBoard``: the breakers of a home (``guards.sqlite``
  plus a shared change counter), with an in-memory fast path.

Imports: storage, policy (the ``Breaker`` settings), core.
"""

from ._breakers import BreakerBoard, BreakerState, HostBreakers

__all__ = ["BreakerBoard", "BreakerState", "HostBreakers"]
