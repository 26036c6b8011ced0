"""The code runners' components, built and compiled once: JavaScript (``guest/js/runner.js``,
for ``js`` and ``ts`` programs) and Python (``guest/python/runner.py``, for ``py`` programs).

Each is built once per runner source in the toolchain directory (the first build
of a machine takes tens of seconds), compiled once per engine's code settings
(``<runner>-<fingerprint>.cwasm`` beside it) and loaded once per
:class:`RunnerComponent` and language (one per home's runs).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from wasmtime.component import Component

from ..core._settings import toolchain_cache_dir
from ..engine._compile import precompile
from ..engine._engine import SharedEngine

__all__ = ["PYTHON", "RunnerComponent", "load_runner", "runner_language"]

#: The language of a program whose runner is the Python one; every other (``js``, ``ts``) runs on QuickJS.
PYTHON = "py"


def runner_language(lang: str) -> str:
    """Which runner runs a program of ``lang``: ``py`` or ``js``."""
    return PYTHON if lang == PYTHON else "js"


class RunnerComponent:
    """The runners' components on the engine ``shared()`` gives, each loaded on its first call."""

    def __init__(self, shared: Callable[[], SharedEngine]) -> None:
        self._shared = shared
        self._lock = threading.Lock()
        self._components: dict[str, Component] = {}

    def __call__(self, lang: str = "js") -> Component:
        runner = runner_language(lang)
        component = self._components.get(runner)
        if component is None:
            with self._lock:
                if runner not in self._components:
                    self._components[runner] = load_runner(self._shared(), runner)
                component = self._components[runner]
        return component


def load_runner(shared: SharedEngine, lang: str = "js") -> Component:
    """Build (once per machine), compile (once per engine settings) and load the code runner of ``lang``."""
    from ..toolchains._build import sdk_dir

    cache = toolchain_cache_dir()
    if runner_language(lang) == PYTHON:
        from ..toolchains._pyrunner import py_runner_component

        wasm = py_runner_component(sdk_dir(), cache)
    else:
        from ..toolchains._jsrunner import runner_component

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
