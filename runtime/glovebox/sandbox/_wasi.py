"""WASI 0.2 for one call: nothing inherited, stdio into the call's logs, a granted directory at most.

Every store of a component that imports WASI gets a fresh ``WasiConfig``
(:func:`wasi_config`), which wasmtime starts empty: no arguments, no
environment, no preopened directory, stdin empty, every socket address refused
and no name lookup; clocks and randomness work. On top of that:

- what the guest writes to stdout and stderr goes to the call's logs (stdout at
  level ``info``, stderr at ``warn``, one entry per write, decoded as UTF-8 with
  replacement), within the call's ``log_bytes``; past it the writes are counted
  in ``logs_dropped`` and thrown away, never blocking the guest;
- a ``files`` grant (``glovebox.capabilities.files``) preopens its one directory
  at ``/files``, read-only or read-write.

A component importing ``wasi:http`` is linked differently (:func:`wasi_http_linker`):
wasmtime-py offers wasi:http only as wasmtime's own HTTP client, which would reach
the network around glovebox's HTTP capability, and a wasi:http body is a
``wasi:io`` stream like stdout, so such a component gets glovebox's own WASI host
(``_wasihttp``), its requests sent by the ``http`` capability.
"""

from __future__ import annotations

import ctypes
import time
import weakref
from collections.abc import Callable
from typing import Any

import wasmtime
import wasmtime._bindings as _bindings
import wasmtime._ffi as ffi
from wasmtime.component import Component, Linker

from ._callstate import CallState

__all__ = ["FILES_GUEST_PATH", "QUOTA_CHECK_S", "wasi_config", "wasi_http_linker", "watch_quota"]

#: Where a granted directory appears to the guest.
FILES_GUEST_PATH = "/files"


def _to_log(state: CallState | None, level: str) -> Callable[[bytes], int]:
    """A stdio writer into ``state``'s logs (wasmtime may call it on a thread of its own)."""

    def write(data: bytes) -> int:
        try:
            if state is not None:
                text = data.decode("utf-8", "replace").rstrip("\n")
                if text:
                    state.add_log(level, text)
        except Exception:  # a host callback never raises into wasm
            pass
        return len(data)

    return write


def wasi_config(state: CallState | None, files: Any = None) -> wasmtime.WasiConfig:
    """A fresh, empty ``WasiConfig``: stdio into ``state``'s logs, ``files`` (a bound grant) preopened."""
    config = wasmtime.WasiConfig()
    config.stdout_custom = _to_log(state, "info")
    config.stderr_custom = _to_log(state, "warn")
    if files is not None and files.directory is not None:
        config.preopen_dir(str(files.directory), FILES_GUEST_PATH, files.writable)
    return config


_HTTP_LINKERS: weakref.WeakKeyDictionary[Component, Linker | None] = weakref.WeakKeyDictionary()


def wasi_http_linker(engine: wasmtime.Engine, component: Component) -> Linker | None:
    """The linker of a component importing ``wasi:http`` (glovebox's own WASI host), else None."""
    try:
        return _HTTP_LINKERS[component]
    except KeyError:
        pass
    from ._wasihttp import imports_wasi_http, linker_for

    linker = linker_for(engine, component) if imports_wasi_http(engine, component) else None
    _HTTP_LINKERS[component] = linker
    return linker


#: Shortest time between two measures of a granted directory while a call runs.
QUOTA_CHECK_S = 0.0005
#: The callback and finalizer types wasmtime's C API takes (ctypes wants these very classes).
_DEADLINE_CALLBACK, _FINALIZER = (_bindings._wasmtime_store_epoch_deadline_callback.argtypes[i] for i in (1, 3))
_NO_FINALIZER = _FINALIZER(lambda data: None)


def watch_quota(store: wasmtime.Store, files: Any, state: CallState | None) -> None:
    """Hold a read-write ``files`` grant's quota while the call runs, not only after it.

    wasmtime-py has no hook on a WASI write, so the store's epoch deadline is set
    to every tick, and at each one (at most every :data:`QUOTA_CHECK_S`) the
    directory is measured: past its quota, and larger than the call found it,
    the call is stopped there and ends ``capability_denied`` (the check after
    the call records the denial). The call's own deadline is kept by the same callback.
    """
    if state is None or files is None or files.directory is None or not files.writable:
        return
    checked = [0.0]

    def tick(_context: Any, _data: Any, delta: Any, kind: Any) -> int:
        try:
            now = time.monotonic()
            if now >= state.deadline:
                return _error("the call's deadline passed")
            if now - checked[0] >= QUOTA_CHECK_S:
                reason = files.after()
                checked[0] = time.monotonic() + (time.monotonic() - now) * 4  # a slow walk is taken less often
                if reason is not None:  # recorded once, by the check after the call
                    return _error(reason)
            delta[0] = 1
            kind[0] = 0  # continue
        except Exception:  # a callback never raises into wasm: the call goes on to its deadline
            delta[0] = 1
        return 0

    callback = _DEADLINE_CALLBACK(tick)
    store.__dict__["_glovebox_quota"] = callback  # alive as long as the store
    ffi.wasmtime_store_epoch_deadline_callback(store.ptr(), callback, None, _NO_FINALIZER)
    store.set_epoch_deadline(1)


def _error(message: str) -> int:
    """A new ``wasmtime_error_t`` (its address): returned by the callback, it stops the guest."""
    error = ffi.wasmtime_error_new(ctypes.create_string_buffer(message.encode("utf-8", "replace")))
    return int(ctypes.cast(error, ctypes.c_void_p).value or 0)
