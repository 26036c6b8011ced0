"""glovebox on a Ray cluster: :class:`RayRuntime` (``pip install 'glovebox[ray]'``).

This module is ``glovebox.ray``; inside the package every import is absolute,
so ``import ray`` always names the Ray distribution, never this module.
"""

from __future__ import annotations

import os

# wasmtime turns a guest's trap into a signal (SIGILL, SIGSEGV) that its own handler
# catches; Ray's failure signal handler, installed by ray.init on top of it, would take
# that signal and end the process. Set before ray.init (this module is imported first).
os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")

try:
    import ray  # noqa: F401  (the extra's presence, checked once here)
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError("glovebox.ray needs Ray: pip install 'glovebox[ray]'") from exc

from glovebox._raycluster import RayRuntime

__all__ = ["RayRuntime"]
