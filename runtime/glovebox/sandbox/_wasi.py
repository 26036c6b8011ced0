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

import weakref
from collections.abc import Callable
from typing import Any

import wasmtime
from wasmtime.component import Component, Linker

from ._callstate import CallState

__all__ = ["FILES_GUEST_PATH", "wasi_config", "wasi_http_linker"]

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
