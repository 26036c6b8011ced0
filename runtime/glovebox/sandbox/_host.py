"""The host side of the glovebox world: every registered capability's host functions, and ``log``.

One linker per engine defines every host function once: ``log`` (in
``glovebox:tool/host@0.1.0``), the host functions of every registered capability
(``glovebox.model._capability``: ``http-fetch``, ``sql``'s ``query``, ``kv``'s
``get``/``set``/``delete``, a third party's) in their interfaces and, for the code
runner alone, ``run``'s ``host-call``. Each function looks up the state of the call
running on its thread (``_callstate.current_call``), so a capability is exactly what
that call was granted: there is no global grant.

Every function is the same C callback, :func:`trampoline`, around a
:class:`~glovebox.model._capability.HostFunction`: it reads the values in place (see
:mod:`._hostabi`), answers, and writes the answer. Host functions never raise into
wasm: every failure becomes the function's typed error value; only arguments of
other types than the world's trap.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from wasmtime import Engine
from wasmtime.component import Linker

from ..core._world import HOST_INTERFACE, LOG_LEVELS, RUN_INTERFACE
from ..model._capability import HostFunction, registered
from ._callstate import CallState, current_call
from ._hostabi import CALLBACK, WrongShape, add_func, lift_host_call, lift_log, lower_text, trap

__all__ = ["host_functions", "make_linker", "trampoline"]

logger = logging.getLogger("glovebox.host")

#: What ``host-call`` answers when no run is answering (never the case for the code runner): stop.
_NO_RUN = '{"stop": true}'


def _log(state: CallState | None, level: str, message: str) -> None:
    if state is not None:
        state.add_log(level if level in LOG_LEVELS else "info", message)


def _host_call(state: CallState | None, kind: str, request: str) -> str:
    runs = None if state is None else state.host_calls
    return _NO_RUN if runs is None else runs.host_call(kind, request)


_LOG = HostFunction("log", lift_log, _log, None)
_HOST_CALL = HostFunction("host-call", lift_host_call, _host_call, lower_text, _NO_RUN)


def trampoline(function: HostFunction) -> Any:
    """The C callback running ``function``: lift, answer for the call on this thread, lower."""
    name, lift, answer, lower, fallback = (
        function.name,
        function.lift,
        function.answer,
        function.lower,
        function.fallback,
    )
    results = function.results

    @CALLBACK  # type: ignore[untyped-decorator]
    def entry(_data: Any, _context: Any, _ty: Any, args: Any, nargs: int, slot: Any, nresults: int) -> int:
        try:
            if nresults != results:
                raise WrongShape(f"{name} returns {results} result(s)")
            values = lift(args, nargs)
        except (WrongShape, UnicodeDecodeError) as exc:
            return trap(f"{name}: {exc}")
        try:
            value = answer(current_call(), *values)
            if lower is not None:
                lower(value, slot)
        except Exception:  # never raise into wasm
            logger.exception("%s host function failed", name)
            if lower is not None:
                lower(fallback, slot)
        return 0

    return entry


def host_functions(run: bool = False) -> dict[str, list[HostFunction]]:
    """Every host function by interface: ``log``, the registered capabilities' and, with ``run``, ``host-call``."""
    interfaces: dict[str, list[HostFunction]] = {HOST_INTERFACE: [_LOG]}
    for capability in registered():
        if capability.interface:  # ``files`` has none: WASI is its interface
            interfaces.setdefault(capability.interface, []).extend(capability.functions())
    if run:
        interfaces[RUN_INTERFACE] = [_HOST_CALL]
    return interfaces


#: The callbacks, made once per process and kept alive for as long as a linker may call them.
_CALLBACKS: dict[tuple[str, str], Any] = {}


def _callbacks(interface: str, functions: Iterable[HostFunction]) -> list[tuple[str, Any]]:
    made = []
    for function in functions:
        key = (interface, function.name)
        if key not in _CALLBACKS:
            _CALLBACKS[key] = trampoline(function)
        made.append((function.name, _CALLBACKS[key]))
    return made


def make_linker(engine: Engine, *, run: bool = False) -> Linker:
    """A component linker defining every host function of every registered capability.

    With ``run``, also the run's ``host-call`` (``glovebox:tool/run``): the code
    runner's linker, never a tool's.
    """
    linker = Linker(engine)
    with linker.root() as root:
        for interface, functions in host_functions(run).items():
            with root.add_instance(interface) as instance:
                for name, callback in _callbacks(interface, functions):
                    add_func(instance, name, callback)
    return linker
