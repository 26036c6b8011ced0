"""The one wasmtime Engine per process, its epoch ticker and its loaded components.

Settings are chosen for density: a pooling allocator (instantiation is a slot
reuse, not an mmap), copy-on-write memory images, small guard regions and no
reservation for growth, so that ten thousand live instances fit in one
process's address space. Fuel metering and epoch interruption are always on:
every store gets a fuel budget and an epoch deadline.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.metadata
import json
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path

import wasmtime
import wasmtime._ffi as ffi
from wasmtime.component import Component

__all__ = ["EngineSettings", "SharedEngine", "compile_config", "get_engine"]

MIB = 1024 * 1024


@dataclass(frozen=True)
class EngineSettings:
    """Process-wide engine settings; part of the compile-cache key."""

    # One memory slot per linear memory: its size is the host's largest
    # memory limit, reserved as address space, not resident.
    max_memory_bytes: int = 256 * MIB
    total_memories: int = 12_000
    # A C tool is 1 core instance, 1 memory, 1 small table. A Python tool
    # (componentize-py: CPython as a shared library, wasi-libc, the WASI
    # adapter and shims) is 38 core instances, 2 memories (CPython's starts at
    # 12.4 MiB) and tables of up to 5,672 funcref elements. The per-component
    # caps below admit it; the totals bound what a process can hold live
    # (about 600 Python instances next to thousands of C ones). Slots are
    # only address space until used, so a C call is not slower for them:
    # it still takes one instance, one memory and one table slot.
    total_core_instances: int = 24_000
    total_component_instances: int = 12_000
    max_core_instances_per_component: int = 64
    max_memories_per_component: int = 8
    total_tables: int = 24_000
    table_elements: int = 20_000
    epoch_tick_ms: float = 1.0
    max_wasm_stack: int = 512 * 1024
    keep_resident_bytes: int = 256 * 1024

    def fingerprint(self) -> str:
        """A digest of everything that changes the compiled code or its layout."""
        blob = json.dumps({"wasmtime": _wasmtime_version(), **asdict(self)}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _wasmtime_version() -> str:
    try:
        return importlib.metadata.version("wasmtime")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - vendored copies
        return "unknown"


def _pooling_config(settings: EngineSettings) -> ctypes._Pointer:  # type: ignore[type-arg]
    pc = ffi.wasmtime_pooling_allocation_config_new()
    ffi.wasmtime_pooling_allocation_config_total_memories_set(pc, settings.total_memories)
    ffi.wasmtime_pooling_allocation_config_total_core_instances_set(pc, settings.total_core_instances)
    ffi.wasmtime_pooling_allocation_config_total_component_instances_set(pc, settings.total_component_instances)
    ffi.wasmtime_pooling_allocation_config_max_core_instances_per_component_set(
        pc, settings.max_core_instances_per_component
    )
    ffi.wasmtime_pooling_allocation_config_max_memories_per_component_set(pc, settings.max_memories_per_component)
    ffi.wasmtime_pooling_allocation_config_total_tables_set(pc, settings.total_tables)
    ffi.wasmtime_pooling_allocation_config_table_elements_set(pc, settings.table_elements)
    ffi.wasmtime_pooling_allocation_config_max_memory_size_set(pc, settings.max_memory_bytes)
    # Reset the first pages of a reused slot with memset instead of madvise:
    # a small tool then starts without page faults (halves instantiate+call).
    ffi.wasmtime_pooling_allocation_config_linear_memory_keep_resident_set(pc, settings.keep_resident_bytes)
    ffi.wasmtime_pooling_allocation_config_table_keep_resident_set(pc, settings.keep_resident_bytes)
    return pc


def compile_config(settings: EngineSettings) -> wasmtime.Config:
    """Everything that shapes generated code (a child compiler uses exactly this)."""
    cfg = wasmtime.Config()
    cfg.consume_fuel = True
    cfg.epoch_interruption = True
    cfg.wasm_component_model = True
    cfg.max_wasm_stack = settings.max_wasm_stack
    cfg.memory_reservation = settings.max_memory_bytes
    cfg.memory_guard_size = 64 * 1024
    cfg.memory_reservation_for_growth = 0
    cfg.parallel_compilation = True
    return cfg


def _config(settings: EngineSettings) -> wasmtime.Config:
    cfg = compile_config(settings)
    pc = _pooling_config(settings)
    ffi.wasmtime_pooling_allocation_strategy_set(cfg.ptr(), pc)
    ffi.wasmtime_pooling_allocation_config_delete(pc)
    return cfg


class SharedEngine:
    """A wasmtime Engine, its epoch ticker thread and a compiled-component cache."""

    def __init__(self, settings: EngineSettings | None = None) -> None:
        self.settings = settings or EngineSettings()
        self.engine = wasmtime.Engine(_config(self.settings))
        self.fingerprint = self.settings.fingerprint()
        self._components: OrderedDict[str, Component] = OrderedDict()
        self._lock = threading.Lock()
        self._ticker = threading.Thread(target=self._tick, name="glovebox-epoch", daemon=True)
        self._ticker.start()

    def _tick(self) -> None:
        # Catch up on oversleeping so that one epoch stays one tick of real time.
        period = self.settings.epoch_tick_ms / 1000.0
        start, ticks = time.monotonic(), 0
        while True:
            time.sleep(period)
            due = int((time.monotonic() - start) / period)
            while ticks < due:
                self.engine.increment_epoch()
                ticks += 1

    def deadline_ticks(self, timeout_ms: int) -> int:
        """Epoch ticks that cover ``timeout_ms`` (plus one for the partial tick)."""
        return int(timeout_ms / self.settings.epoch_tick_ms) + 1

    def cached(self, digest: str) -> Component | None:
        """A component already loaded in this process, if any."""
        with self._lock:
            hit = self._components.get(digest)
            if hit is not None:
                self._components.move_to_end(digest)
            return hit

    def remember(self, digest: str, component: Component) -> None:
        """Keep a loaded component in memory (least recently used are dropped)."""
        with self._lock:
            self._components[digest] = component
            while len(self._components) > 256:
                self._components.popitem(last=False)

    def load(self, compiled: Path) -> Component:
        """Memory-map a serialized component made with this engine's settings."""
        return Component.deserialize_file(self.engine, str(compiled))

    def forget(self, digest: str) -> None:
        """Drop a component from the in-memory cache."""
        with self._lock:
            self._components.pop(digest, None)


_shared: SharedEngine | None = None
_shared_lock = threading.Lock()


def get_engine() -> SharedEngine:
    """The process-wide engine, created on first use."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = SharedEngine()
        return _shared
