"""How an engine allocates instances: a pool that fits the address space, or on demand.

A pooling allocator reserves all its slots up front (address space, not
memory): with the default settings about 3 TB. Under an address-space limit
(``RLIMIT_AS``, ``ulimit -v``) wasmtime cannot map that, and it reports the
failure with a Rust panic that aborts the process, so the reservation is
computed here before wasmtime is asked: the pool shrinks to fit the limit,
leaving headroom for the rest of the process, and when not even a small pool
fits, instances are allocated on demand (slower instantiation, same code).
"""

from __future__ import annotations

import ctypes
import mmap
import resource
from dataclasses import dataclass
from pathlib import Path

import wasmtime
import wasmtime._ffi as ffi

from ._codegen import compile_config
from ._settings import EngineSettings

__all__ = ["Allocation", "address_space_budget", "engine_config", "plan_allocation", "pool_reservation_bytes"]

GIB = 1024 * 1024 * 1024
#: Address space kept free for everything but the pool (heap, thread stacks,
#: malloc arenas, on-demand stores): the larger of this and a quarter of the limit.
MIN_HEADROOM_BYTES = 1 * GIB
_POINTER_BYTES = ctypes.sizeof(ctypes.c_void_p)


@dataclass(frozen=True)
class Allocation:
    """What an engine's instance allocator reserves.

    Attributes:
        memories: linear-memory slots in the pool; 0 allocates on demand.
        tables: table slots in the pool.
        reserved_bytes: address space the pool reserves up front.
    """

    memories: int
    tables: int
    reserved_bytes: int

    @property
    def pooled(self) -> bool:
        """Whether instances come from a pool (else they are allocated on demand)."""
        return self.memories > 0

    def describe(self) -> str:
        """A short description for the log."""
        if not self.pooled:
            return "on-demand allocation"
        return f"a pool of {self.memories} memories and {self.tables} tables ({self.reserved_bytes / GIB:.1f} GiB)"


ON_DEMAND = Allocation(memories=0, tables=0, reserved_bytes=0)


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def pool_reservation_bytes(settings: EngineSettings, memories: int, tables: int) -> int:
    """Address space a pool of ``memories`` memory slots and ``tables`` table slots reserves.

    Each memory slot is the slot size plus its guard region (and one guard
    precedes the first); each table slot holds ``table_elements`` pointers.
    Stack slots are not pooled (``total_stacks`` is 0: calls are synchronous);
    instance metadata is allocated with malloc as needed.
    """
    page = mmap.PAGESIZE
    memory_slot = _round_up(settings.memory_slot_bytes, page) + settings.memory_guard_bytes
    table_slot = _round_up(settings.table_elements * _POINTER_BYTES, page)
    return settings.memory_guard_bytes + memories * memory_slot + tables * table_slot


def address_space_budget() -> int | None:
    """Address space a pool may take under ``RLIMIT_AS``, or None when there is no limit."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    return soft - _address_space_in_use(soft) - max(MIN_HEADROOM_BYTES, soft // 4)


def _address_space_in_use(limit: int) -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return limit // 4  # unknown: assume a quarter of the limit is taken


def plan_allocation(settings: EngineSettings, budget: int | None) -> Allocation:
    """The pool ``settings`` ask for, shrunk to ``budget`` bytes, or on-demand allocation.

    Args:
        settings: the engine settings (their totals are the largest pool).
        budget: the address space the pool may reserve; None for no limit.

    Returns:
        The full pool when it fits; else the largest pool with the same
        memory-to-table ratio that fits, as long as it holds a whole component
        (``max_memories_per_component`` memories); else ``ON_DEMAND``.
    """
    if not settings.pooling:
        return ON_DEMAND
    full = _pool(settings, settings.total_memories)
    if budget is None or full.reserved_bytes <= budget:
        return full
    memories = budget * settings.total_memories // full.reserved_bytes
    while memories >= settings.max_memories_per_component:
        shrunk = _pool(settings, memories)
        if shrunk.reserved_bytes <= budget:
            return shrunk
        memories -= 1
    return ON_DEMAND


def _pool(settings: EngineSettings, memories: int) -> Allocation:
    tables = max(1, memories * settings.total_tables // settings.total_memories)
    return Allocation(memories, tables, pool_reservation_bytes(settings, memories, tables))


def engine_config(settings: EngineSettings, allocation: Allocation) -> wasmtime.Config:
    """The wasmtime Config for ``settings``: ``compile_config`` plus the allocation strategy."""
    cfg = compile_config(**settings.codegen())
    if allocation.pooled:
        pc = _pooling_config(settings, allocation)
        ffi.wasmtime_pooling_allocation_strategy_set(cfg.ptr(), pc)
        ffi.wasmtime_pooling_allocation_config_delete(pc)
    return cfg


def _pooling_config(settings: EngineSettings, allocation: Allocation) -> ctypes._Pointer:  # type: ignore[type-arg]
    pc = ffi.wasmtime_pooling_allocation_config_new()
    ffi.wasmtime_pooling_allocation_config_total_memories_set(pc, allocation.memories)
    ffi.wasmtime_pooling_allocation_config_total_tables_set(pc, allocation.tables)
    ffi.wasmtime_pooling_allocation_config_total_stacks_set(pc, 0)
    ffi.wasmtime_pooling_allocation_config_total_core_instances_set(pc, settings.total_core_instances)
    ffi.wasmtime_pooling_allocation_config_total_component_instances_set(pc, settings.total_component_instances)
    ffi.wasmtime_pooling_allocation_config_max_core_instances_per_component_set(
        pc, settings.max_core_instances_per_component
    )
    ffi.wasmtime_pooling_allocation_config_max_memories_per_component_set(pc, settings.max_memories_per_component)
    ffi.wasmtime_pooling_allocation_config_table_elements_set(pc, settings.table_elements)
    ffi.wasmtime_pooling_allocation_config_max_memory_size_set(pc, settings.memory_slot_bytes)
    # Reset the first pages of a reused slot with memset instead of madvise:
    # a small tool then starts without page faults (halves instantiate+call).
    ffi.wasmtime_pooling_allocation_config_linear_memory_keep_resident_set(pc, settings.keep_resident_bytes)
    ffi.wasmtime_pooling_allocation_config_table_keep_resident_set(pc, settings.keep_resident_bytes)
    return pc
