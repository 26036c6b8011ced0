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
    *, memory_reservation_bytes: int, memory_guard_bytes: int, max_wasm_stack_bytes: int
) -> wasmtime.Config:
    """A wasmtime Config with fuel, epochs and the memory layout that compiled code assumes.

    Args:
        memory_reservation_bytes: address space reserved per linear memory
            (bounds checks are elided up to it).
        memory_guard_bytes: the guard region after each linear memory.
        max_wasm_stack_bytes: the largest wasm stack before ``call stack exhausted``.
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
    return cfg
