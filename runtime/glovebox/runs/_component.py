"""The code runner's component (``guest/js/runner.js``), built and compiled once.

It is built once per runner source in the toolchain directory (the first build
of a machine takes tens of seconds), compiled once per engine's code settings
(``<runner>-<fingerprint>.cwasm`` beside it) and loaded once per
:class:`RunnerComponent` (one per home's runs).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from wasmtime.component import Component

from ..core._settings import toolchain_cache_dir
from ..engine._compile import precompile
from ..engine._engine import SharedEngine

__all__ = ["RunnerComponent", "load_runner"]


class RunnerComponent:
    """The runner's component on the engine ``shared()`` gives, loaded on the first call."""

    def __init__(self, shared: Callable[[], SharedEngine]) -> None:
        self._shared = shared
        self._lock = threading.Lock()
        self._component: Component | None = None

    def __call__(self) -> Component:
        component = self._component
        if component is None:
            with self._lock:
                if self._component is None:
                    self._component = load_runner(self._shared())
                component = self._component
        return component


def load_runner(shared: SharedEngine) -> Component:
    """Build (once per machine), compile (once per engine settings) and load the code runner."""
    from ..toolchains._build import sdk_dir
    from ..toolchains._jsrunner import runner_component

    cache = toolchain_cache_dir()
    wasm = runner_component(sdk_dir(), cache)
    compiled = cache / f"{wasm.stem}-{shared.fingerprint}.cwasm"
    if not compiled.is_file():
        partial = compiled.with_name(f"{compiled.name}.tmp{os.getpid()}.{threading.get_ident()}")
        try:
            precompile(wasm, partial, shared.settings, "the code runner")
            os.replace(partial, compiled)
        finally:
            partial.unlink(missing_ok=True)
    loaded: Component = shared.load(compiled)
    return loaded
