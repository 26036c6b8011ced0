"""The wasmtime side of a Runtime: engine, sandbox, compiled cache and registrar.

A Runtime makes these on its first call or registration, not when it is
opened, so that commands which only read the registry, the policy or the audit
log never create an engine (nor reserve its instance pool).
"""

from __future__ import annotations

import threading
from pathlib import Path

from ..engine._engine import SharedEngine, acquire_engine
from ..engine._settings import EngineSettings
from ..registry._compiled import CompiledCache
from ..registry._registration import Registrar
from ..registry._registry import Registry
from ..sandbox._sandbox import Sandbox

__all__ = ["WasmParts"]


class WasmParts:
    """One Runtime's hold on a shared engine, and what it built on it."""

    def __init__(
        self,
        settings: EngineSettings,
        registry: Registry,
        home: Path,
        trusted_keys_dir: Path,
        require_signatures: bool,
    ) -> None:
        self.shared: SharedEngine = acquire_engine(settings)
        self._released = False
        self._lock = threading.Lock()
        try:
            self.sandbox = Sandbox(self.shared)
            self.compiled = CompiledCache(self.shared, registry, home / "cache" / "compiled")
            self.registrar = Registrar(registry, self.compiled, self.sandbox, trusted_keys_dir, require_signatures)
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """Let go of the engine (its ticker stops with its last user). Idempotent."""
        with self._lock:
            if self._released:
                return
            self._released = True
        self.shared.release()
