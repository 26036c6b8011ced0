"""Pre-initialise a core module at build time: run its init export once, keep the memory it made.

What Wizer does, for the one shape glovebox builds (wasm32, one memory, active
data segments, ``__stack_pointer`` the only mutable global and back at its start
value once an export returns): instantiate the module in wasmtime, call
``_initialize`` and the init export, read the linear memory, and write a new
module whose data segments are that memory (the all-zero 4 KiB pages left
out), whose memory starts at the size it reached, and which no longer exports
``_initialize`` or the init function. An instance of the result starts where
initialisation ended, so a call skips it; wasmtime maps the image copy-on-write.

The host imports are stand-ins during initialisation: the clock reads 0 and
random numbers are 0 (so a build is reproducible), ``log`` is kept for the error
message, and ``http-fetch`` traps (the network is a call's, not a build's).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import wasmtime

from ..core._errors import BuildError

__all__ = ["Snapshot", "initialise", "rewrite"]

PAGE = 65536
_CHUNK = 4096
_MEMORY, _EXPORT, _DATA, _DATACOUNT = 5, 7, 11, 12
#: Fuel for the build-time run of a tool's top level (~1 s of interpreted JavaScript).
INIT_FUEL = 20_000_000_000
INIT_MEMORY_BYTES = 256 * 1024 * 1024


@dataclass
class Snapshot:
    """The memory a module's initialisation left, and the error text its init export returned."""

    memory: bytes
    error: str | None
    logs: list[str] = field(default_factory=list)


def initialise(engine: wasmtime.Engine, module: wasmtime.Module, init: str, args: list[bytes]) -> Snapshot:
    """Instantiate ``module``, run ``_initialize`` then ``init``; return the memory it left.

    Each argument is copied into the guest (NUL-terminated) and passed as
    ``(ptr, len)``. ``init`` returns 0, or a pointer to a NUL-terminated message
    saying why it failed.
    """
    store = wasmtime.Store(engine)
    store.set_fuel(INIT_FUEL)
    store.set_limits(memory_size=INIT_MEMORY_BYTES)
    logs: list[str] = []
    linker = wasmtime.Linker(engine)
    for imp in module.imports:
        linker.define(store, imp.module, imp.name or "", _stand_in(store, imp, logs))
    try:
        instance = linker.instantiate(store, module)
        exports = instance.exports(store)
        memory = exports["memory"]
        assert isinstance(memory, wasmtime.Memory)
        exports["_initialize"](store)  # type: ignore[operator]
        flat: list[int] = []
        for arg in args:
            ptr = exports["cabi_realloc"](store, 0, 0, 1, len(arg) + 1)  # type: ignore[operator]
            memory.write(store, arg + b"\0", ptr)
            flat += [ptr, len(arg)]
        answer = exports[init](store, *flat)  # type: ignore[operator]
        data = bytes(memory.read(store, 0, memory.data_len(store)))
    except (wasmtime.Trap, wasmtime.WasmtimeError) as exc:
        reason = str(exc).strip().splitlines()
        if store.get_fuel() == 0:
            raise BuildError("the tool's top-level code did not finish at build time (it may loop)") from exc
        detail = "; ".join(logs) or (reason[0] if reason else type(exc).__name__)
        raise BuildError(f"the tool's top-level code failed at build time: {detail}") from exc
    error = data[answer : data.index(b"\0", answer)].decode("utf-8", "replace") if answer else None
    return Snapshot(memory=data, error=error, logs=logs)


def _stand_in(store: wasmtime.Store, imp: wasmtime.ImportType, logs: list[str]) -> wasmtime.Func:
    ty = imp.type
    assert isinstance(ty, wasmtime.FuncType)
    name = f"{imp.module}#{imp.name}"
    results = list(ty.results)

    def zero(caller: wasmtime.Caller, *args: int) -> object:
        if results:
            return 0
        memory = caller.get("memory")
        if args and isinstance(memory, wasmtime.Memory):  # a record returned through a pointer: all zero
            memory.write(caller, bytes(16), args[-1])
        return None

    def log(caller: wasmtime.Caller, level: int, ptr: int, length: int) -> None:
        memory = caller.get("memory")
        if isinstance(memory, wasmtime.Memory) and len(logs) < 20:
            logs.append(bytes(memory.read(caller, ptr, ptr + length)).decode("utf-8", "replace")[:500])

    def refuse(*args: object) -> object:
        raise wasmtime.Trap(f"{name} is not available at build time: call it inside the tool's function")

    if name == "glovebox:tool/host@0.1.0#log":
        return wasmtime.Func(store, ty, log, access_caller=True)
    if imp.module.startswith("wasi:"):
        return wasmtime.Func(store, ty, zero, access_caller=True)
    return wasmtime.Func(store, ty, refuse)


# -- writing the pre-initialised module -------------------------------------------------


def rewrite(module: bytes, memory: bytes, drop_exports: frozenset[str]) -> bytes:
    """``module`` with ``memory`` as its data, its memory's minimum at ``len(memory)``, exports dropped."""
    if len(memory) % PAGE:
        raise BuildError("the snapshot is not a whole number of wasm pages")
    out = bytearray(module[:8])
    segments = list(_segments(memory))
    for section, payload in _sections(module):
        if section == _MEMORY:
            payload = _memory_section(payload, len(memory) // PAGE)
        elif section == _EXPORT:
            payload = _export_section(payload, drop_exports)
        elif section == _DATACOUNT:
            payload = _uleb(len(segments))
        elif section == _DATA:
            _check_active(payload)
            payload = _data_section(segments)
        out += bytes([section]) + _uleb(len(payload)) + payload
    return bytes(out)


def _sections(module: bytes) -> Iterator[tuple[int, bytes]]:
    pos = 8
    while pos < len(module):
        section = module[pos]
        size, pos = _read_uleb(module, pos + 1)
        yield section, module[pos : pos + size]
        pos += size


def _memory_section(payload: bytes, pages: int) -> bytes:
    count, pos = _read_uleb(payload, 0)
    if count != 1 or payload[pos] not in (0, 1):
        raise BuildError("only a module with one 32-bit memory can be pre-initialised")
    flags = payload[pos]
    _, pos = _read_uleb(payload, pos + 1)
    tail = b""
    if flags == 1:
        maximum, _ = _read_uleb(payload, pos)
        tail = _uleb(max(maximum, pages))
    return _uleb(1) + bytes([flags]) + _uleb(pages) + tail


def _export_section(payload: bytes, drop: frozenset[str]) -> bytes:
    count, pos = _read_uleb(payload, 0)
    kept: list[bytes] = []
    for _ in range(count):
        start = pos
        length, pos = _read_uleb(payload, pos)
        name = payload[pos : pos + length].decode()
        pos += length + 1  # the kind byte
        _, pos = _read_uleb(payload, pos)
        if name not in drop:
            kept.append(payload[start:pos])
    return _uleb(len(kept)) + b"".join(kept)


def _check_active(payload: bytes) -> None:
    count, pos = _read_uleb(payload, 0)
    for _ in range(count):
        if payload[pos] != 0:
            raise BuildError("a module with passive data segments cannot be pre-initialised")
        pos += 1
        while payload[pos] != 0x0B:  # the offset expression (i32.const N, end)
            pos += 1
        length, pos = _read_uleb(payload, pos + 1)
        pos += length


def _segments(memory: bytes) -> Iterator[tuple[int, bytes]]:
    """Runs of 4 KiB chunks that hold a non-zero byte, as (offset, bytes)."""
    zero = bytes(_CHUNK)
    start: int | None = None
    for offset in range(0, len(memory), _CHUNK):
        empty = memory[offset : offset + _CHUNK] == zero
        if not empty and start is None:
            start = offset
        elif empty and start is not None:
            yield start, memory[start:offset]
            start = None
    if start is not None:
        yield start, memory[start:]


def _data_section(segments: list[tuple[int, bytes]]) -> bytes:
    out = bytearray(_uleb(len(segments)))
    for offset, data in segments:
        out += b"\x00\x41" + _sleb(offset) + b"\x0b" + _uleb(len(data)) + data
    return bytes(out)


def _read_uleb(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def _uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _sleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        done = (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40)
        out.append(byte | (0 if done else 0x80))
        if done:
            return bytes(out)
