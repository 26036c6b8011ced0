"""The host side of the `glovebox:tool/host@0.1.0` interface.

One linker per engine defines every host function once; each function looks
up the state of the call running on its thread (``_callstate.current_call``), so a
capability is exactly what that call was granted: there is no global grant.
Host functions never raise into wasm (wasmtime-py parks exceptions in a
process-global slot): every failure becomes a typed error value.
"""

from __future__ import annotations

import logging
from typing import Any

from wasmtime import Engine
from wasmtime.component import Linker, Variant

from ._callstate import current_call
from ._world import HOST_INTERFACE, LOG_LEVELS

__all__ = ["make_linker"]

logger = logging.getLogger("glovebox.host")


def _log(_store: Any, level: Any, message: Any) -> None:
    try:
        state = current_call()
        if state is not None:
            state.add_log(level if level in LOG_LEVELS else "info", str(message))
    except Exception:  # pragma: no cover - never raise into wasm
        logger.exception("log host function failed")


def _http_fetch(_store: Any, request: Any) -> Any:
    try:
        state = current_call()
        if state is not None and state.http is not None:
            return state.http.fetch(request, state)
        reason = "the http capability is not granted to this call"
        if state is not None:
            url = state.clip(str(getattr(request, "url", "")))
            method = state.clip(str(getattr(request, "method", "")), 32)
            state.add_denial({"capability": "http", "method": method, "url": url, "reason": reason})
            state.add_egress({"method": method, "url": url, "error": "denied", "ms": 0.0})
        return Variant("denied", reason)
    except Exception:  # pragma: no cover - never raise into wasm
        logger.exception("http-fetch host function failed")
        return Variant("network", "host error")


def make_linker(engine: Engine) -> Linker:
    """A component linker defining the whole host interface."""
    linker = Linker(engine)
    with linker.root() as root, root.add_instance(HOST_INTERFACE) as host:
        host.add_func("log", _log)
        host.add_func("http-fetch", _http_fetch)
    return linker
