"""What shapes generated code: the one wasmtime Config every engine starts from.

The compile child (``_compile``) imports this file alone, as a top-level
module, so it uses nothing but the standard library and wasmtime. A component
serialized with this configuration loads on a pooled engine and on an
on-demand one alike: how instances are allocated is added on top by
``_allocation`` and never changes the code.
"""

from __future__ import annotations

import wasmtime

__all__ = ["compile_config"]


def compile_config(
    *,
    memory_reservation_bytes: int,
    memory_guard_bytes: int,
    max_wasm_stack_bytes: int,
    memory_init_cow: bool = True,
) -> wasmtime.Config:
    """A wasmtime Config with fuel, epochs and the memory layout that compiled code assumes.

    Args:
        memory_reservation_bytes: address space reserved per linear memory
            (bounds checks are elided up to it).
        memory_guard_bytes: the guard region after each linear memory.
        max_wasm_stack_bytes: the largest wasm stack before ``call stack exhausted``.
        memory_init_cow: store each module's initial memory as a page-aligned
            image that instances map copy-on-write (wasmtime refuses a file
            compiled with the other choice).
    """
    cfg = wasmtime.Config()
    cfg.consume_fuel = True
    cfg.epoch_interruption = True
    cfg.wasm_component_model = True
    cfg.max_wasm_stack = max_wasm_stack_bytes
    cfg.memory_reservation = memory_reservation_bytes
    cfg.memory_guard_size = memory_guard_bytes
    cfg.memory_reservation_for_growth = 0
    cfg.parallel_compilation = True
    # With it, a module's initial memory is a page-aligned image in the compiled
    # file, mapped copy-on-write into each instance when the file is
    # memory-mapped (``SharedEngine.load``): a Python tool's 12 MiB CPython heap
    # is then shared by all its instances, each paying only for the pages it
    # writes. wasmtime's default; named here because density depends on it.
    cfg.memory_init_cow = memory_init_cow
    return cfg
