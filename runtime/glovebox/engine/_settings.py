"""How an engine is built: its instance pool, memory layout and epoch tick."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from dataclasses import dataclass, fields, replace
from typing import Any, NamedTuple, TypedDict

from ..model._manifest import HOST_MAXIMA

__all__ = ["EngineSettings", "StoreCaps", "WASM_PAGE_BYTES"]

KIB = 1024
MIB = 1024 * KIB
WASM_PAGE_BYTES = 64 * KIB


class Codegen(TypedDict):
    """``_codegen.compile_config``'s arguments."""

    memory_reservation_bytes: int
    memory_guard_bytes: int
    max_wasm_stack_bytes: int
    memory_init_cow: bool


class StoreCaps(NamedTuple):
    """Bounds of one call's store besides its memory cap (``EngineSettings.store_caps``)."""

    table_elements: int
    instances: int
    tables: int
    memories: int


@dataclass(frozen=True)
class EngineSettings:
    """Settings of a wasmtime engine; ``Runtime(engine=...)`` takes one.

    Runtimes with equal settings share one engine (and its loaded components)
    per process. The pool totals are upper bounds: when the process's
    address-space limit (``RLIMIT_AS``) cannot hold them, the engine gets a
    smaller pool, or allocates instances on demand (see the README's "Engine").

    Attributes:
        memory_slot_bytes: the largest linear memory an instance can have; each
            memory reserves this much address space (not resident memory).
            Default: the host's largest ``limits.memory_bytes``.
        memory_guard_bytes: the guard region after each linear memory.
        total_memories: linear memories the pool holds at once (a C tool uses
            one, a Python tool two).
        total_tables: tables the pool holds at once.
        table_elements: the largest table, in elements.
        total_core_instances: core instances the pool holds at once (a C tool
            is one, a Python tool 38).
        total_component_instances: component instances the pool holds at once.
        max_core_instances_per_component: core instances one component may have.
        max_memories_per_component: linear memories one component may have.
        max_wasm_stack_bytes: the largest wasm stack before ``call stack exhausted``.
        keep_resident_bytes: bytes of a reused memory or table slot reset with
            ``memset`` rather than returned to the kernel.
        scan_resident_bytes: on the native core where Linux answers
            ``PAGEMAP_SCAN`` (6.7+): of the pages a call wrote in a memory, how many
            bytes its reused slot restores in place and keeps, rather than returning
            them to the kernel for the next call to fault in again (``keep_resident_bytes``
            applies where the scan is unavailable, and on the Python path). A warm slot
            holds at most this much of what its calls wrote.
        epoch_tick_ms: the epoch ticker's period; deadlines are counted in ticks.
        pooling: False allocates every instance on demand (no pool at all).
    """

    memory_slot_bytes: int = HOST_MAXIMA.memory_bytes
    memory_guard_bytes: int = 64 * KIB
    # A C tool is 1 core instance, 1 memory, 1 small table. A Python tool
    # (componentize-py: CPython as a shared library, wasi-libc, the WASI
    # adapter and shims) is 38 core instances, 2 memories (CPython's starts at
    # 12.4 MiB) and tables of up to 5,672 funcref elements. The per-component
    # caps admit it; the totals bound what a process can hold live.
    total_memories: int = 12_000
    total_tables: int = 24_000
    table_elements: int = 20_000
    total_core_instances: int = 24_000
    total_component_instances: int = 12_000
    max_core_instances_per_component: int = 64
    max_memories_per_component: int = 8
    max_wasm_stack_bytes: int = 512 * KIB
    keep_resident_bytes: int = 256 * KIB
    scan_resident_bytes: int = 4 * MIB
    epoch_tick_ms: float = 1.0
    pooling: bool = True

    def __post_init__(self) -> None:
        for field in fields(self):
            _check_field(field.name, getattr(self, field.name))
        for name in ("memory_slot_bytes", "memory_guard_bytes"):
            if getattr(self, name) % WASM_PAGE_BYTES:
                raise ValueError(f"{name} must be a multiple of the 64 KiB wasm page")
        if self.max_core_instances_per_component > self.total_core_instances:
            raise ValueError("max_core_instances_per_component exceeds total_core_instances")
        if self.max_memories_per_component > self.total_memories:
            raise ValueError("max_memories_per_component exceeds total_memories")

    def sized_for(self, max_in_flight: int) -> EngineSettings:
        """These settings with a pool that holds ``max_in_flight`` live C-tool instances.

        Each total that is too small for that many instances (plus a fifth for
        registrations and bursts) is raised, keeping the defaults' ratios; settings
        that already hold them are returned unchanged. A call beyond the pool's
        slots answers ``overloaded``.
        """
        want = max_in_flight + max_in_flight // 5
        if self.total_memories >= want and self.total_component_instances >= want:
            return self
        return replace(
            self,
            total_memories=max(self.total_memories, want),
            total_tables=max(self.total_tables, 2 * want),
            total_core_instances=max(self.total_core_instances, 2 * want),
            total_component_instances=max(self.total_component_instances, want),
        )

    def store_caps(self) -> StoreCaps:
        """What one call's store may hold beyond its memory cap, on both allocation strategies.

        A pool bounds tables, instances and memories by its slots; allocating on demand, a
        guest's ``table.grow`` would otherwise take host memory that no cap counts (50 million
        elements are 400 MB for a handful of fuel).
        """
        per_component = self.max_core_instances_per_component
        return StoreCaps(self.table_elements, per_component, per_component, self.max_memories_per_component)

    def codegen(self) -> Codegen:
        """The settings that shape compiled code: ``_codegen.compile_config``'s arguments.

        Copy-on-write memory images are always on; they are named here so
        that the cache key covers them (wasmtime refuses a file compiled
        without them).
        """
        return {
            "memory_reservation_bytes": self.memory_slot_bytes,
            "memory_guard_bytes": self.memory_guard_bytes,
            "max_wasm_stack_bytes": self.max_wasm_stack_bytes,
            "memory_init_cow": True,
        }

    def fingerprint(self) -> str:
        """A digest of the wasmtime version and of what changes compiled code (the cache key).

        Pool sizes and the epoch tick are left out: a component compiled once
        loads on every engine whose code settings match, pooled or not.
        """
        blob = json.dumps({"wasmtime": _wasmtime_version(), **self.codegen()}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _check_field(name: str, value: Any) -> None:
    if name == "pooling":
        if not isinstance(value, bool):
            raise TypeError(f"pooling must be a bool, not {type(value).__name__}")
        return
    number_ok = isinstance(value, (int, float)) if name == "epoch_tick_ms" else isinstance(value, int)
    if isinstance(value, bool) or not number_ok:
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    if value < 0 or (value == 0 and name != "memory_guard_bytes"):
        raise ValueError(f"{name} must be positive, not {value}")


def _wasmtime_version() -> str:
    try:
        return importlib.metadata.version("wasmtime")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - vendored copies
        return "unknown"
