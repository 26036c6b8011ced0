"""One tool invocation: a fresh Store and instance, limits set, `call` run, dropped.

Nothing reaches the guest but its input and the host interface: no files, no
environment, no arguments, no network. Each call gets its own fuel budget,
memory cap, epoch deadline and output cap.

Two linkers: components that import no WASI (C tools) use the lean one, which
defines the host interface only. Components that import WASI 0.2 (Python
tools: CPython is built on wasi-libc) use a second linker that also has
``add_wasip2()``, and their store gets an empty ``WasiConfig``: no arguments, no
environment, no preopened directories, stdin empty, stdout and stderr
going to the call's logs (never the host's), every socket address refused, no
name lookup; a ``files`` grant preopens its directory (see ``_wasi``).
Clocks and randomness work. The choice is made once per component and cached.
The code runner of ``Runtime.run`` gets a third linker, the WASI one plus the
run's ``host-call`` (``glovebox:tool/run``), used only when a run hands its
host calls to :meth:`Sandbox.run`: no tool is ever linked with it.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import wasmtime
from wasmtime.component import Component, ExportIndex, Linker

from ..core._errors import CallError, CapabilityDenied, InvalidArtifact, InvalidInput, OutputTooLarge
from ..core._world import EXPORT_NAME
from ..engine._engine import SharedEngine
from ..model._manifest import Limits
from ._callstate import ActiveCall, CallState, Fetcher, HostCalls, SqlAccess
from ._fastcall import Instantiation, RawStore, call_tool, post_return
from ._host import make_linker
from ._outcome import Ending, call_error, returned_error
from ._typed import OutputTooBig, TypedExport, call_typed, export_index, typed_exports
from ._validate import imports_wasi
from ._wasi import wasi_config, wasi_http_linker, watch_quota
from ._witvalues import ConversionError, params_from_json

if TYPE_CHECKING:
    from ._native import NativeCore

__all__ = ["Outcome", "Sandbox"]


@dataclass
class Outcome:
    """What one invocation produced: output text, or the error, and what it cost."""

    output_text: str | None
    error: CallError | None
    fuel_used: int
    state: CallState


class Sandbox:
    """Runs invocations of compiled components on a shared engine."""

    def __init__(self, shared: SharedEngine) -> None:
        self.shared = shared
        self._caps = shared.settings.store_caps()
        self._linker: Linker = make_linker(shared.engine)
        self._wasi_linker: Linker | None = None
        self._runner_linker: Linker | None = None
        self._wants_wasi: weakref.WeakKeyDictionary[Component, bool] = weakref.WeakKeyDictionary()
        self._typed: weakref.WeakKeyDictionary[Component, dict[tuple[str, str], TypedExport]] = (
            weakref.WeakKeyDictionary()
        )
        self._live = 0
        self._live_lock = threading.Lock()
        #: Whether calls may take the native core (the extension is installed, ``GLOVEBOX_NATIVE`` is not 0).
        from ._native import native_extension  # not at import: `import glovebox` stays lean

        self._native_wanted = native_extension() is not None
        self._core: NativeCore | None = None
        self._core_made = False

    @property
    def native_core(self) -> NativeCore | None:
        """The native invocation core (see ``_native``), or None when calls take the Python path."""
        if not self._core_made:
            from ._native import native_core

            self._core = native_core(self.shared) if self._native_wanted else None
            self._core_made = True
        return self._core

    @property
    def live_instances(self) -> int:
        """Instances alive right now (for metrics)."""
        return self._live

    def _linker_for(self, component: Component) -> Linker:
        wants = self._wants_wasi.get(component)
        if wants is None:
            wants = self._wants_wasi[component] = imports_wasi(self.shared.engine, component)
        if not wants:
            return self._linker
        own = wasi_http_linker(self.shared.engine, component)  # wasi:http: glovebox's own WASI host
        if own is not None:
            return own
        if self._wasi_linker is None:
            linker = make_linker(self.shared.engine)
            linker.add_wasip2()
            self._wasi_linker = linker
        return self._wasi_linker

    def _run_linker(self) -> Linker:
        """The code runner's linker: the host interface, WASI with nothing granted, and the run's ``host-call``."""
        if self._runner_linker is None:
            linker = make_linker(self.shared.engine, run=True)
            linker.add_wasip2()
            self._runner_linker = linker
        return self._runner_linker

    def _store(
        self,
        component: Component,
        limits: Limits,
        wasi: bool | None = None,
        files: Any = None,
        state: CallState | None = None,
    ) -> wasmtime.Store:
        store = wasmtime.Store(self.shared.engine)
        caps = self._caps
        store.set_limits(
            memory_size=limits.memory_bytes,
            table_elements=caps.table_elements,
            instances=caps.instances,
            tables=caps.tables,
            memories=caps.memories,
        )
        store.set_fuel(limits.fuel)
        store.set_epoch_deadline(self.shared.deadline_ticks(limits.timeout_ms))
        if wasi if wasi is not None else self._linker_for(component) is not self._linker:
            # Nothing inherited (see ``_wasi``): stdio into the call's logs, a granted directory at most.
            store.set_wasi(wasi_config(state, files))
            watch_quota(store, files, state)  # a read-write files grant's quota, held while the call runs
        return store

    def run(
        self,
        component: Component,
        input_text: str,
        limits: Limits,
        capabilities: Mapping[str, Any] | None = None,
        host_calls: HostCalls | None = None,
        *,
        http: Fetcher | None = None,
        sql: SqlAccess | None = None,
        native: Any = None,
    ) -> Outcome:
        """Instantiate ``component`` afresh and call it once with ``input_text``.

        ``capabilities`` are the call's bound capabilities by name
        (``glovebox.capabilities.bind_capabilities``); one missing answers ``denied``.
        ``http`` and ``sql`` bind those two alone (tests of one capability).
        With ``host_calls`` (the code runner of ``Runtime.run`` only), the
        component is linked with the run's ``host-call`` as well, answered by it.
        ``native`` is the same component loaded by the native core
        (``CompiledCache.native``): the call then runs there, the GIL released.
        """
        bound = dict(capabilities or {})
        if http is not None:
            bound["http"] = http
        if sql is not None:
            bound["sql"] = sql
        deadline = time.monotonic() + limits.timeout_ms / 1000.0
        state = CallState(
            deadline=deadline,
            log_limit_bytes=limits.log_bytes,
            http=bound.get("http"),
            sql=bound.get("sql"),
            capabilities=bound,
            host_calls=host_calls,
        )
        _files_denied(bound.get("files"), state)
        with self._live_lock:
            self._live += 1
        try:
            with ActiveCall(state):
                # A files grant keeps the Python path: its directory and quota watch are ``_wasi``'s.
                python_only = native is None or host_calls is not None or bound.get("files") is not None
                core = None if python_only else self.native_core
                if core is not None:
                    ran = self._invoke_native(core, native, input_text, limits, state)
                elif host_calls is not None:
                    store = self._store(component, limits, wasi=True, state=state)
                    ran = self._invoke(store, component, input_text, self._run_linker())
                elif self._linker_for(component) is self._linker:
                    ran = self._invoke_raw(component, input_text, limits)
                else:
                    store = self._store(component, limits, files=bound.get("files"), state=state)
                    ran = self._invoke(store, component, input_text)
        finally:
            with self._live_lock:
                self._live -= 1
        error = _files_after(bound, state) or _judged(ran, limits, state)
        output = ran.result[1] if error is None and ran.result is not None else None
        return Outcome(output_text=output, error=error, fuel_used=limits.fuel - ran.fuel_left, state=state)

    def typed_export(self, component: Component, interface: str, function: str) -> TypedExport | None:
        """The typed export ``interface#function`` of ``component`` (None when it has none by that name)."""
        exports = self._typed.get(component)
        if exports is None:
            found = typed_exports(self.shared.engine, component)
            exports = self._typed[component] = {(e.interface, e.function): e for e in found}
        return exports.get((interface, function))

    def run_export(
        self,
        component: Component,
        interface: str,
        function: str,
        value: Any,
        limits: Limits,
        capabilities: Mapping[str, Any] | None = None,
    ) -> Outcome:
        """Call the typed export ``interface#function`` once, on a fresh instance, with the JSON input ``value``.

        The input is converted before anything is instantiated: a value that does
        not fit the function's types answers ``invalid_input`` naming its path.
        """
        bound = dict(capabilities or {})
        state = CallState(
            deadline=time.monotonic() + limits.timeout_ms / 1000.0,
            log_limit_bytes=limits.log_bytes,
            http=bound.get("http"),
            sql=bound.get("sql"),
            capabilities=bound,
        )
        _files_denied(bound.get("files"), state)
        export = self.typed_export(component, interface, function)
        if export is None:
            raise InvalidArtifact(f"the component has no export {interface}#{function}")
        try:
            args = params_from_json(export.shape, value)
        except ConversionError as exc:
            refused = InvalidInput(
                f"the input does not fit {export.qualified}'s WIT types: {exc}", details={"path": exc.path}
            )
            return Outcome(output_text=None, error=refused, fuel_used=0, state=state)
        with self._live_lock:
            self._live += 1
        try:
            with ActiveCall(state):
                store = self._store(component, limits, files=bound.get("files"), state=state)
                ran = self._invoke_typed(store, component, export, args, limits)
        finally:
            with self._live_lock:
                self._live -= 1
        fuel_used = limits.fuel - ran.fuel_left
        if ran.too_big:
            too_large = OutputTooLarge(
                f"the tool's output has more values than its {limits.output_bytes}-byte limit can hold",
                details={"limit": limits.output_bytes},
            )
            return Outcome(output_text=None, error=too_large, fuel_used=fuel_used, state=state)
        error = _files_after(bound, state) or call_error(ran.ending(limits, state))
        output = ran.result[1] if error is None and ran.result is not None else None
        return Outcome(output_text=output, error=error, fuel_used=fuel_used, state=state)

    def _invoke_typed(
        self, store: wasmtime.Store, component: Component, export: TypedExport, args: list[Any], limits: Limits
    ) -> _Ran:
        instantiating = True
        try:
            instance = self._linker_for(component).instantiate(store, component)
            index = export_index(component, export.interface, export.function)
            func = None if index is None else instance.get_func(store, index)
            if func is None:
                raise wasmtime.WasmtimeError(f"component does not export `{export.qualified}`")
            instantiating = False
            # Every JSON value takes two bytes at least (``0,``): more values cannot fit the output.
            ran = _Ran(result=call_typed(func, store, export.shape, args, limits.output_bytes // 2 + 1))
            post_return(func, store)
        except OutputTooBig:
            ran = _Ran(too_big=True)
        except (wasmtime.Trap, wasmtime.WasmtimeError, wasmtime.ExitTrap) as exc:
            ran = _Ran.failed(exc, instantiating)
        ran.fuel_left = _fuel_left(store)
        return ran

    def probe(self, component: Component, limits: Limits, source: str) -> None:
        """Instantiate once without calling, to prove the component links and starts."""
        state = CallState(deadline=time.monotonic() + limits.timeout_ms / 1000.0, log_limit_bytes=0)
        store = self._store(component, limits)
        try:
            with ActiveCall(state):
                self._linker_for(component).instantiate(store, component)
        except (wasmtime.Trap, wasmtime.WasmtimeError, wasmtime.ExitTrap) as exc:
            error = call_error(Ending(limits, exc=exc, fuel_left=_fuel_left(store), instantiating=True))
            if error is not None and error.code in ("memory_limit", "fuel_exhausted", "timeout"):
                reason = error.message
            else:
                reason = " ".join(str(exc).strip().splitlines()[:3])
            raise InvalidArtifact(f"{source} cannot be instantiated: {reason}") from exc

    def _invoke_raw(self, component: Component, input_text: str, limits: Limits) -> _Ran:
        """The lean path for components without WASI (see ``_fastcall.RawStore``)."""
        ticks = self.shared.deadline_ticks(limits.timeout_ms)
        store = RawStore(self.shared.engine, limits.memory_bytes, limits.fuel, ticks, self._caps)
        try:
            ran = _Ran(result=store.call(self._linker, component, _export_index(component), input_text))
        except wasmtime.WasmtimeError as exc:
            ran = _Ran.failed(exc, isinstance(exc, Instantiation))
        finally:
            fuel_left = store.fuel_left()
            store.close()
        ran.fuel_left = fuel_left
        return ran

    def _invoke_native(self, core: NativeCore, native: Any, input_text: str, limits: Limits, state: CallState) -> _Ran:
        """The native core's call (see ``_native``): its failure text is judged like wasmtime-py's."""
        ticks = self.shared.deadline_ticks(limits.timeout_ms)
        got = core.call(native, input_text, limits.memory_bytes, limits.fuel, ticks, state)
        if got.exit_status is not None:
            exited = wasmtime.ExitTrap(f"Exited with i32 exit status {got.exit_status}")
            exited.code = got.exit_status
            ran = _Ran.failed(exited, got.instantiating)
        elif got.text is not None:
            exc = Instantiation(got.text) if got.instantiating else wasmtime.WasmtimeError(got.text)
            ran = _Ran.failed(exc, got.instantiating)
        else:
            ran = _Ran(result=got.result)
        ran.fuel_left = got.fuel_left
        return ran

    def _invoke(
        self, store: wasmtime.Store, component: Component, input_text: str, linker: Linker | None = None
    ) -> _Ran:
        instantiating = True
        try:
            instance = (linker or self._linker_for(component)).instantiate(store, component)
            func = instance.get_func(store, _export_index(component))
            if func is None:
                raise wasmtime.WasmtimeError("component does not export `call`")
            instantiating = False
            ran = _Ran(result=call_tool(func, store, input_text))
            post_return(func, store)
        except (wasmtime.Trap, wasmtime.WasmtimeError, wasmtime.ExitTrap) as exc:
            ran = _Ran.failed(exc, instantiating)
        ran.fuel_left = _fuel_left(store)
        return ran


def _files_denied(files: Any, state: CallState) -> None:
    """A ``files`` grant refused when it was bound (a symlink out, a hard link): recorded as a denial."""
    if files is not None and files.denied is not None:
        state.add_denial({"capability": "files", "directory": files.name, "reason": files.denied})


def _files_after(bound: Mapping[str, Any], state: CallState) -> CallError | None:
    """``capability_denied`` when the call left its files directory over its quota."""
    files = bound.get("files")
    reason = None if files is None else files.after()
    if files is None or reason is None:
        return None
    state.add_denial({"capability": "files", "reason": reason, **files.details})
    return CapabilityDenied(reason, details=dict(files.details))


@dataclass
class _Ran:
    """What one invocation returned or raised, before it is judged."""

    result: tuple[bool, str] | None = None
    exc: Exception | None = None
    instantiating: bool = False
    fuel_left: int = 0
    failed_at: float = 0.0
    too_big: bool = False

    @classmethod
    def failed(cls, exc: Exception, instantiating: bool) -> _Ran:
        return cls(exc=exc, instantiating=instantiating, failed_at=time.monotonic())

    def ending(self, limits: Limits, state: CallState) -> Ending:
        return Ending(
            limits,
            exc=self.exc,
            fuel_left=self.fuel_left,
            deadline_passed=self.exc is not None and self.failed_at >= state.deadline,
            instantiating=self.instantiating,
            guest_reported_oom=state.oom_reported,
            timed_out_in_host=state.timed_out,
            denials=state.denials,
            upstream_failures=state.upstream_failures,
            approval=state.approval,
            guest_result=self.result,
        )


def _judged(ran: _Ran, limits: Limits, state: CallState) -> CallError | None:
    """The error of an invocation that ended like ``ran`` (``call_error``), or None."""
    result = ran.result
    if ran.exc is None and result is not None and result[0]:  # the guest returned ok: most calls
        return returned_error(result, limits, state.timed_out)
    return call_error(ran.ending(limits, state))


def _fuel_left(store: wasmtime.Store) -> int:
    try:
        return store.get_fuel()
    except wasmtime.WasmtimeError:
        return 0


_EXPORT_INDEXES: weakref.WeakKeyDictionary[Component, ExportIndex] = weakref.WeakKeyDictionary()


def _export_index(component: Component) -> ExportIndex | str:
    index = _EXPORT_INDEXES.get(component)
    if index is None:
        index = component.get_export_index(EXPORT_NAME)
        if index is None:
            return EXPORT_NAME
        _EXPORT_INDEXES[component] = index
    return index
