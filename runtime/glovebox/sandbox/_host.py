"""The host side of the `glovebox:tool/host@0.1.0` interface (and, for the code runner alone, `run`).

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

from ..core._world import HOST_INTERFACE, LOG_LEVELS, RUN_INTERFACE, SQL_INTERFACE
from ._callstate import HttpRequest, current_call
from ._hostabi import (
    CALLBACK,
    WrongShape,
    add_func,
    lift_host_call,
    lift_log,
    lift_query,
    lift_request,
    lower_response,
    lower_sql,
    lower_text,
    trap,
)

__all__ = ["http_fetch", "make_linker", "sql_query"]

logger = logging.getLogger("glovebox.host")

_HOST_ERROR = Variant("network", "host error")
_SQL_HOST_ERROR = Variant("database", "host error")


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


def sql_query(database: str, statement: str, params: list[Any]) -> Any:
    """Answer one guest statement for the call on this thread: the rows' JSON text or a ``sql-error``."""
    state = current_call()
    if state is not None and state.sql is not None:
        return state.sql.query(database, statement, params, state)
    reason = "the sql capability is not granted to this call"
    if state is not None:
        database = state.clip(database, 64)
        state.add_denial({"capability": "sql", "database": database, "kind": "unknown", "reason": reason})
    return Variant("denied", reason)


@CALLBACK  # type: ignore[untyped-decorator]
def _sql_query_entry(_data: Any, _context: Any, _ty: Any, args: Any, nargs: int, results: Any, nresults: int) -> int:
    try:
        if nresults != 1:
            raise WrongShape("query returns one result")
        database, statement, params = lift_query(args, nargs)
    except (WrongShape, UnicodeDecodeError) as exc:
        return trap(f"query: {exc}")
    try:
        lower_sql(sql_query(database, statement, params), results)
    except Exception:  # never raise into wasm
        logger.exception("sql query host function failed")
        lower_sql(_SQL_HOST_ERROR, results)
    return 0


#: What ``host-call`` answers when no run is answering (never the case for the code runner): stop.
_NO_RUN = '{"stop": true}'


@CALLBACK  # type: ignore[untyped-decorator]
def _host_call_entry(_data: Any, _context: Any, _ty: Any, args: Any, nargs: int, results: Any, nresults: int) -> int:
    try:
        if nresults != 1:
            raise WrongShape("host-call returns one result")
        kind, request = lift_host_call(args, nargs)
    except (WrongShape, UnicodeDecodeError) as exc:
        return trap(f"host-call: {exc}")
    try:
        state = current_call()
        runs = None if state is None else state.host_calls
        answer = _NO_RUN if runs is None else runs.host_call(kind, request)
        lower_text(answer, results)
    except Exception:  # never raise into wasm
        logger.exception("host-call host function failed")
        lower_text(_NO_RUN, results)
    return 0


def make_linker(engine: Engine, *, run: bool = False) -> Linker:
    """A component linker defining the whole host interface (``host`` and ``sql``).

    With ``run``, also the run's ``host-call`` (``glovebox:tool/run``): the code
    runner's linker, never a tool's.
    """
    linker = Linker(engine)
    with linker.root() as root:
        with root.add_instance(HOST_INTERFACE) as host:
            add_func(host, "log", _log_entry)
            add_func(host, "http-fetch", _http_fetch_entry)
        with root.add_instance(SQL_INTERFACE) as sql:
            add_func(sql, "query", _sql_query_entry)
        if run:
            with root.add_instance(RUN_INTERFACE) as runs:
                add_func(runs, "host-call", _host_call_entry)
    return linker
