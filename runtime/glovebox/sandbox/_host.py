"""The host side of the `glovebox:tool/host@0.1.0` interface.

One linker per engine defines every host function once; each function looks
up the state of the call running on its thread (``_callstate.current_call``), so a
capability is exactly what that call was granted: there is no global grant.
The functions are C callbacks whose values are read and written in place (see
:mod:`._hostabi`). Host functions never raise into wasm: every failure becomes
a typed error value; only arguments of other types than the world's trap.
"""

from __future__ import annotations

import logging
from typing import Any

from wasmtime import Engine
from wasmtime.component import Linker, Variant

from ..core._world import HOST_INTERFACE, LOG_LEVELS
from ._callstate import HttpRequest, current_call
from ._hostabi import CALLBACK, WrongShape, add_func, lift_log, lift_request, lower_response, trap

__all__ = ["http_fetch", "make_linker"]

logger = logging.getLogger("glovebox.host")

_HOST_ERROR = Variant("network", "host error")


def http_fetch(request: HttpRequest) -> Any:
    """Answer one guest request for the call on this thread: a response record or an ``http-error``."""
    state = current_call()
    if state is not None and state.http is not None:
        return state.http.fetch(request, state)
    reason = "the http capability is not granted to this call"
    if state is not None:
        url = state.clip(request.url)
        method = state.clip(request.method, 32)
        state.add_denial({"capability": "http", "method": method, "url": url, "reason": reason})
        state.add_egress({"method": method, "url": url, "error": "denied", "ms": 0.0})
    return Variant("denied", reason)


@CALLBACK  # type: ignore[untyped-decorator]
def _http_fetch_entry(_data: Any, _context: Any, _ty: Any, args: Any, nargs: int, results: Any, nresults: int) -> int:
    try:
        if nresults != 1:
            raise WrongShape("http-fetch returns one result")
        request = lift_request(args, nargs)
    except (WrongShape, UnicodeDecodeError) as exc:
        return trap(f"http-fetch: {exc}")
    try:
        lower_response(http_fetch(request), results)
    except Exception:  # never raise into wasm
        logger.exception("http-fetch host function failed")
        lower_response(_HOST_ERROR, results)
    return 0


@CALLBACK  # type: ignore[untyped-decorator]
def _log_entry(_data: Any, _context: Any, _ty: Any, args: Any, nargs: int, _results: Any, nresults: int) -> int:
    try:
        if nresults != 0:
            raise WrongShape("log returns nothing")
        level, message = lift_log(args, nargs)
    except (WrongShape, UnicodeDecodeError) as exc:
        return trap(f"log: {exc}")
    try:
        state = current_call()
        if state is not None:
            state.add_log(level if level in LOG_LEVELS else "info", message)
    except Exception:  # pragma: no cover - never raise into wasm
        logger.exception("log host function failed")
    return 0


def make_linker(engine: Engine) -> Linker:
    """A component linker defining the whole host interface."""
    linker = Linker(engine)
    with linker.root() as root, root.add_instance(HOST_INTERFACE) as host:
        add_func(host, "log", _log_entry)
        add_func(host, "http-fetch", _http_fetch_entry)
    return linker
