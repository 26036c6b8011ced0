"""The native invocation core: one call with the GIL released, when ``glovebox_native`` is installed.

``glovebox_native`` (the Rust crate in ``native/``, built by ``make`` with maturin) runs
one invocation of a pre-linked component (its ``InstancePre``) entirely in native
code: a fresh Store with the call's fuel, memory cap and epoch deadline, the
instantiation, ``call``, the lifting of its result (post-return included) and the
Store's drop, without the GIL. ``log`` is buffered natively and replayed into the
call's state afterwards (the same budget and scrubbing as the Python path). Every
other built-in host function (``http-fetch``, ``sql``'s ``query``, ``kv``'s ``get``,
``set`` and ``delete``, ``client``'s ``sample`` and ``elicit``) is answered by
Python: the native callback takes the GIL for as long as :meth:`NativeCore.dispatch`
runs, which adapts the values, calls the capability's ``answer`` for the call on this
thread, and hands the answer back to be written in the function's result type.

WASI 0.2 is linked natively too (``wasmtime-wasi``, synchronous), granting what the
Python path's empty ``WasiConfig`` grants (``_wasi``): no arguments, no environment,
no preopened directory, stdin empty, every socket address refused, no name lookup;
clocks and randomness. stdout and stderr go into the native log buffer, one entry per
write (stdout at ``info``, stderr at ``warn``, UTF-8 with replacement, trailing
newlines cut, empty writes skipped), so they reach the call's logs in order with
``log`` and under the same budget. A WASI exit comes back as its status and is
judged as the Python path's ``ExitTrap``. A WASI clock wait (``time.sleep``,
``std::thread::sleep``) blocks in the host, where the epoch never interrupts it:
here none ends later than the call's deadline, and a wait that reaches it ends
the call ``timeout`` at once (wasmtime-py's WASI, on the Python path, has no such
bound: see docs/reference/limits.md).

It is used, per component, when all of these hold (else the call takes the Python
path, which is the same code as without the extension):

- the extension imports and ``GLOVEBOX_NATIVE`` is not ``0``;
- the component links with the native linker: it imports nothing but the host
  functions above and WASI 0.2 (JavaScript and Python tools, Rust and Go components):
  not ``wasi:http`` (glovebox's own WASI host sends its requests through the HTTP
  capability, ``_wasihttp``), nor a third-party capability's interface, whose values
  only its own lift and lower read;
- the call has no ``files`` capability bound (its directory, read-only or read-write,
  and the quota watched while the call runs are the Python path's ``_wasi``);
- the call is a tool call (not the code runner of ``Runtime.run``, nor a typed export).

The native engine is a second wasmtime engine (the ``wasmtime`` crate, 48.x) beside
wasmtime-py's, with the same code settings (fuel, epoch interruption, memory layout,
stack) and a pool sized like the Python one within what the address space has left.
It compiles each component itself, in the same resource-limited child as the Python
path (``engine._compile``), into ``HOME/cache/compiled/<digest>-native-<fp>.cwasm``,
its SHA-256 recorded in the registry and checked before every load, like the Python
path's. The file name's fingerprint covers the extension's wasmtime version, what else
fixes its engine's configuration (``engine_features``: synchronous, WASI linked) and
the code settings, so a ``.cwasm`` is never offered to an engine configured otherwise.
Its epoch ticker is a native thread that runs while the engine has users.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from ..core._settings import native_enabled
from ..core._world import HOST_INTERFACE, LOG_LEVELS, OOM_MARKER, WRONG_TYPES
from ..engine._allocation import ON_DEMAND, address_space_budget, plan_allocation
from ..engine._engine import SharedEngine
from ..engine._settings import EngineSettings
from ._callstate import CallState, HttpRequest, current_call, log_listener
from ._host import host_functions
from ._hostabi import WrongShape

__all__ = ["NATIVE_ENV", "NativeCore", "NativeRan", "native_core", "native_extension", "native_fingerprint"]

logger = logging.getLogger("glovebox")

#: ``0`` forces the Python path even when the extension is installed.
NATIVE_ENV = "GLOVEBOX_NATIVE"
#: Bytes of log messages buffered natively per call (Python then keeps ``limits.log_bytes`` of them, scrubbed).
_LOG_SLACK_BYTES = 64 * 1024


#: The interface between this package and ``glovebox_native`` (the module's ``ABI``): an extension
#: built from other sources (a checkout updated but not rebuilt) is not used.
NATIVE_ABI = 7


def native_extension() -> ModuleType | None:
    """The ``glovebox_native`` module, or None when it is absent, stale or ``GLOVEBOX_NATIVE=0``."""
    if not native_enabled():
        return None
    try:
        module = importlib.import_module("glovebox_native")
    except ImportError:
        return None
    built = getattr(module, "ABI", 1)
    if built != NATIVE_ABI:
        _warn_stale(built)
        return None
    return module


@functools.cache
def _warn_stale(built: object) -> None:
    logger.warning(
        "glovebox_native was built for interface %s, this glovebox needs %s: calls take the Python path "
        "until it is rebuilt (make native)",
        built,
        NATIVE_ABI,
    )


def _strings(values: tuple[Any, ...]) -> tuple[Any, ...]:
    if not all(isinstance(value, str) for value in values):
        raise WrongShape("the arguments are not strings")
    return values


def _request(values: tuple[Any, ...]) -> tuple[Any, ...]:
    if len(values) != 1 or not isinstance(values[0], dict):
        raise WrongShape("http-fetch takes one http-request record")
    record = values[0]
    try:
        method, url, headers, body = record["method"], record["url"], record["headers"], record["body"]
    except KeyError as exc:
        raise WrongShape(f"http-request has no field {exc}") from exc
    pairs = [tuple(pair) for pair in headers] if isinstance(headers, list) else None
    if (
        not isinstance(method, str)
        or not isinstance(url, str)
        or pairs is None
        or not all(len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], str) for p in pairs)
        or not (body is None or isinstance(body, bytes))
    ):
        raise WrongShape("http-request has fields of other types")
    return (HttpRequest(method=method, url=url, headers=pairs, body=body),)


_SQL_TYPES: dict[str, type | None] = {"null": None, "integer": int, "float": float, "text": str, "blob": bytes}


def _query(values: tuple[Any, ...]) -> tuple[Any, ...]:
    if len(values) != 3 or not isinstance(values[2], list):
        raise WrongShape("query takes a database, a statement and a list of sql-values")
    database, statement, raw = values
    _strings((database, statement))
    params = []
    for item in raw:
        kind = _SQL_TYPES.get(item[0], bool) if isinstance(item, tuple) and len(item) == 2 else bool
        if kind is bool or (kind is not None and not isinstance(item[1], kind)):
            raise WrongShape("a parameter is not a sql-value")
        params.append(item[1])
    return database, statement, params


#: How the native callback's values become each built-in function's arguments, by (interface, name).
_ADAPTERS: dict[tuple[str, str], Callable[[tuple[Any, ...]], tuple[Any, ...]]] = {
    (HOST_INTERFACE, "http-fetch"): _request,
    ("glovebox:tool/sql@0.1.0", "query"): _query,
    ("glovebox:tool/kv@0.1.0", "get"): _strings,
    ("glovebox:tool/kv@0.1.0", "set"): _strings,
    ("glovebox:tool/kv@0.1.0", "delete"): _strings,
    ("glovebox:tool/client@0.1.0", "sample"): _strings,
    ("glovebox:tool/client@0.1.0", "elicit"): _strings,
}


class NativeRan:
    """What one native invocation returned (see ``glovebox_native.NativeComponent.call``)."""

    __slots__ = ("exit_status", "fuel_left", "instantiating", "result", "text")

    def __init__(self, answer: Sequence[Any], state: CallState) -> None:
        status, payload, self.fuel_left, logs, dropped, oom, self.instantiating = answer
        self.result: tuple[bool, str] | None = (status == 0, payload) if status < 2 else None
        self.text: str | None = payload if status == 2 else None
        #: The guest's WASI exit status when it exited (``wasi:cli/exit``).
        self.exit_status: int | None = int(payload) if status == 3 else None
        if logs or dropped or oom:
            for level, message in logs:
                state.add_log(level, message)
            state.logs_dropped += dropped
            state.oom_reported = state.oom_reported or oom


class NativeCore:
    """The native engine beside a SharedEngine, with the same code settings and its own ticker."""

    def __init__(self, extension: ModuleType, settings: EngineSettings) -> None:
        self.settings = settings
        codegen = dict(settings.codegen())
        #: The compile-cache key of its code (never equal to a wasmtime-py fingerprint).
        self.fingerprint = native_fingerprint(extension.wasmtime_version(), extension.engine_features(), codegen)
        self.extension = extension
        #: Calls run here so far (tests and metrics read it).
        self.calls = 0
        #: Loaded components by artifact digest, for every home of the process (False: it does not link here).
        self._loaded: OrderedDict[str, Any] = OrderedDict()
        self._loaded_lock = threading.Lock()
        self._functions: list[tuple[Any, Callable[[tuple[Any, ...]], tuple[Any, ...]]]] = []
        host: list[tuple[str, str, int]] = []
        for interface, functions in host_functions().items():
            for function in functions:
                adapt = _ADAPTERS.get((interface, function.name))
                if adapt is not None:
                    host.append((interface, function.name, len(self._functions)))
                    self._functions.append((function, adapt))
        allocation = plan_allocation(settings, address_space_budget())
        pool = None if allocation == ON_DEMAND else _pool(settings, allocation.memories, allocation.tables)
        words = (HOST_INTERFACE, list(LOG_LEVELS), OOM_MARKER, WRONG_TYPES)
        self.engine = extension.NativeEngine(codegen, pool, host, self.dispatch, *words, settings.store_caps())

    def start_ticker(self, tick_ms: float) -> None:
        """Start the native engine's epoch thread (with the SharedEngine's ticker)."""
        self.engine.start_ticker(tick_ms)

    def stop_ticker(self) -> None:
        """Stop the native engine's epoch thread."""
        self.engine.stop_ticker()

    def load(self, path: str) -> Any | None:
        """The pre-linked native component compiled at ``path``, or None when it does not link natively."""
        try:
            component, why = self.engine.load(path)
        except ValueError as exc:  # refused by this build of the extension: the Python path runs it
            logger.warning("the native core cannot load %s (%s); it runs on the Python path", path, exc)
            return None
        if component is None:
            logger.debug("%s runs on the Python path: %s", path, why)
        return component

    def loaded(self, digest: str) -> Any | None:
        """The component loaded for the artifact ``digest`` by any home of the process (False: it does not link
        here), or None when none has loaded it: a second home need not compile it again."""
        with self._loaded_lock:
            return self._loaded.get(digest)

    def keep(self, digest: str, component: Any, limit: int) -> None:
        """Remember what loading the artifact ``digest`` gave (at most ``limit`` artifacts, least recent dropped)."""
        with self._loaded_lock:
            self._loaded[digest] = component
            self._loaded.move_to_end(digest)
            while len(self._loaded) > limit:
                self._loaded.popitem(last=False)

    def dispatch(self, key: int, args: tuple[Any, ...]) -> tuple[str | None, Any, Any]:
        """Answer one host function for the call on this thread: (trap message, answer, fallback)."""
        function, adapt = self._functions[key]
        try:
            values = adapt(args)
        except WrongShape as exc:
            return str(exc), None, None
        try:
            answer = function.answer(current_call(), *values)
        except Exception:  # never raise into wasm
            logger.exception("%s host function failed", function.name)
            answer = function.fallback
        return None, answer, function.fallback

    def call(self, component: Any, input_text: str, memory_bytes: int, fuel: int, ticks: int, state: CallState) -> Any:
        """One invocation of a loaded native component (the GIL released while it runs).

        ``ticks`` is the epoch deadline of the guest's code; the call's deadline (``state.deadline``) also
        ends every WASI clock wait, which blocks in the host where no epoch check runs.
        """
        keep = state.log_limit_bytes * 4 + _LOG_SLACK_BYTES
        self.calls += 1
        live = state.add_log if log_listener() is not None else None  # lines relayed as they come
        left_ms = (state.deadline - time.monotonic()) * 1000.0
        return NativeRan(component.call(input_text, memory_bytes, fuel, ticks, left_ms, keep, live), state)


def native_fingerprint(wasmtime_version: str, engine_features: str, codegen: dict[str, Any]) -> str:
    """The native compile-cache key: the extension's wasmtime, its engine's configuration and the code settings.

    ``engine_features`` is what the extension says fixes its engine besides the code settings
    (synchronous or async, WASI linked, its wasm stack): a build that changes any of them
    names its files differently, so a ``.cwasm`` made for one engine is never offered to another.
    """
    blob = json.dumps(
        {"native-wasmtime": wasmtime_version, "native-engine": engine_features, **codegen}, sort_keys=True
    )
    return "native-" + hashlib.sha256(blob.encode()).hexdigest()[:16]


def native_core(shared: SharedEngine) -> NativeCore | None:
    """The native core beside ``shared`` (made once per engine), or None when it is off or absent."""
    extension = native_extension()
    if extension is None:
        return None
    return shared.companion("native", lambda: _make(extension, shared.settings))  # type: ignore[no-any-return]


def _make(extension: ModuleType, settings: EngineSettings) -> NativeCore | None:
    try:
        return NativeCore(extension, settings)
    except RuntimeError as exc:
        logger.warning("the native core cannot start (%s); calls take the Python path", exc)
        return None


def _pool(settings: EngineSettings, memories: int, tables: int) -> dict[str, int]:
    return {
        "total_memories": memories,
        "total_tables": tables,
        "total_core_instances": settings.total_core_instances,
        "total_component_instances": settings.total_component_instances,
        "max_core_instances_per_component": settings.max_core_instances_per_component,
        "max_memories_per_component": settings.max_memories_per_component,
        "table_elements": settings.table_elements,
        "max_memory_size": settings.memory_slot_bytes,
        "keep_resident_bytes": settings.keep_resident_bytes,
        "scan_resident_bytes": settings.scan_resident_bytes,
        # Reset only the pages a call wrote (Linux 6.7+, else off), restoring them in place up to
        # scan_resident_bytes: a Python tool's call writes ~0.5 MiB of CPython's heap image; measured
        # 1,110 -> 960 µs per bare Python-tool call with the scan, 913 -> 560 µs with the pages kept
        # (bench/README.md).
        "pagemap_scan": True,
    }
