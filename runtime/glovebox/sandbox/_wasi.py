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

``wasi:http`` is not linked: wasmtime-py offers only wasmtime's own HTTP client,
which would reach the network around glovebox's HTTP capability (its allowlist,
SSRF defence, secrets and audit). A component importing it is refused at
registration (``sandbox._validate``); tools fetch through ``http-fetch``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import wasmtime

from ._callstate import CallState

__all__ = ["FILES_GUEST_PATH", "wasi_config"]

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
