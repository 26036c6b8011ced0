"""glovebox on a Ray cluster: :class:`RayRuntime` (``pip install 'glovebox-runtime[ray]'``).

This module is ``glovebox.ray``; inside the package every import is absolute,
so ``import ray`` always names the Ray distribution, never this module.
"""

from __future__ import annotations

from .core._settings import quiet_ray_failure_handler

quiet_ray_failure_handler()  # before ray.init: this module is imported first

try:
    import ray  # noqa: F401  (the extra's presence, checked once here)
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError("glovebox.ray needs Ray: pip install 'glovebox-runtime[ray]'") from exc

from .scale._raycluster import RayRuntime  # noqa: E402  (after the environment default)

__all__ = ["RayRuntime"]
