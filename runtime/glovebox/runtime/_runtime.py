"""The Runtime facade: register tools, list them, call them."""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from wasmtime.component import Component

from ..audit._log import AuditLog
from ..audit._row import bare_row
from ..capabilities import CapabilityContext, bind_capabilities
from ..core import _settings
from ..core._errors import CallError, CallTimeout, InvalidInput, InvalidOutput, Overloaded, ToolNotFound
from ..core._jsonlimits import JsonRejected, checked_text, escape_surrogates
from ..core._jsonlimits import loads as loads_json
from ..engine._settings import EngineSettings
from ..guards import BreakerBoard, BreakerState, HostBreakers
from ..model._grants import Grants, GrantsSource, load_grants
from ..model._result import CallResult, ToolInfo
from ..policy import Approval, Decision, Policy
from ..policy._guards import Breaker
from ..registry._compiled import CompiledCache
from ..registry._keyring import Keyring
from ..registry._registration import ManifestSource, Registrar, resolve_manifest
from ..registry._registry import Registry
from ..runs._result import RunResult
from ..sandbox._compute import DEFAULT_MAX_RUNNING, ComputeSlots, waiting
from ..sandbox._sandbox import Sandbox
from ..schema._schemas import SchemaCheck, encode_input, sized_input
from ..telemetry import _tracing
from ..telemetry._tracing import TracedCall, Tracing, step
from . import _coderun
from ._admission import DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_QUEUED, Admission, mapping_bound
from ._checks import OutputChecks
from ._envelope import RUN_CONTEXT, failure, new_call_id, new_meta
from ._gate import CallTrace, PolicyGate, input_digest
from ._retry import Attempts
from ._wasmparts import WasmParts

if TYPE_CHECKING:
    import httpx

    from ..sandbox._callstate import CallState

__all__ = ["Runtime", "load_grants", "resolve_manifest"]

logger = logging.getLogger("glovebox")
#: What ``explain`` says when no policy is loaded: the built-in behaviour.
NO_POLICY_REASON = (
    "no policy is loaded (glovebox --policy FILE, or GLOVEBOX_POLICY): a tool without required scopes runs,"
    " granted only the Runtime's grants (GLOVEBOX_GRANTS; none by default); a tool with required scopes is refused"
)


class Runtime:
    """Registers tools and runs each call in a fresh, isolated wasm instance.

    Args:
        home: where artifacts, caches, the index, approvals and the audit log
            live (default: ``GLOVEBOX_HOME``, else a per-user data directory).
        policy: a policy file (reloaded when it changes) or a ``Policy``; else
            ``GLOVEBOX_POLICY``. With neither, tools without required scopes
            run, tools that require scopes are refused, and nothing is granted
            beyond ``grants``.
        require_signatures: refuse unsigned artifacts at registration
            (default: the ``GLOVEBOX_REQUIRE_SIGNATURES`` environment variable).
        grants: what every call is granted when no policy is configured (with a
            policy, the policy's grants govern): a :class:`Grants`, a dict, or a
            JSON/TOML grants file; default ``GLOVEBOX_GRANTS`` (a file path), else nothing.
        transport: an ``httpx`` transport for the HTTP capability (tests use
            ``httpx.MockTransport``); default: real connections.
        engine: the wasmtime engine's settings (instance pool, memory slots,
            guard regions); Runtimes with equal settings share one engine. It
            is created on the first call or registration, not here. Default:
            ``EngineSettings()``, its pool raised to hold ``max_in_flight`` instances.
        max_in_flight: calls this Runtime runs at once, from every door (``call``
            from any thread, ``acall``, the servers); a call waiting on an
            upstream counts. Default 10,000.
        max_queued: calls that may wait for a slot beyond ``max_in_flight``
            (default 10,000); beyond both a call answers ``overloaded`` at once.
        max_running: admitted calls that run Python or wasm at once (default
            two per core); a call gives its compute slot up while it waits on
            the network and takes it back in arrival order (see ``glovebox.sandbox._compute``).
        tracer_provider: the OpenTelemetry ``TracerProvider`` whose tracer makes
            the call spans; default: the global provider, looked up per call, so
            one configured later takes effect (with none configured, or without
            opentelemetry, no span is made). See ``glovebox.telemetry._tracing``.

    Raises:
        InvalidPolicy: the policy file given at construction cannot be used
            (nothing is created in the home then).
        NotADirectoryError: ``home`` is a file or lies under one.

    Use it as a context manager, or call ``close()`` when done.
    """

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        policy: str | os.PathLike[str] | Policy | None = None,
        *,
        require_signatures: bool | None = None,
        grants: GrantsSource = None,
        transport: httpx.BaseTransport | None = None,
        engine: EngineSettings | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_queued: int = DEFAULT_MAX_QUEUED,
        tracer_provider: Any = None,
        max_running: int = DEFAULT_MAX_RUNNING,
    ):
        if engine is not None and not isinstance(engine, EngineSettings):
            raise TypeError(f"engine must be an EngineSettings, not {type(engine).__name__}")
        self._admission = Admission(max_in_flight, max_queued, maps=mapping_bound())
        self._compute = ComputeSlots(max_running)
        self._tracing = Tracing(tracer_provider)
        self.home = _settings.check_home(_settings.home_dir(home))
        if policy is None:
            policy = _settings.policy_file()
        # The inputs are checked before anything is written in the home.
        self._grants = load_grants(grants if grants is not None else _settings.grants_file())
        self._gate = PolicyGate(self.home, policy)
        self.policy_path = self._gate.path
        self._policy_given = policy is not None
        self._audit = AuditLog(self.home)
        self._transport = transport
        self._registry = Registry(self.home)
        bound = self._admission.max_in_flight
        self.engine_settings = engine if engine is not None else EngineSettings().sized_for(bound)
        self._wasm_parts: WasmParts | None = None
        self._wasm_lock = threading.Lock()
        self.trusted_keys_dir = _settings.trusted_keys_dir(self.home)
        self.require_signatures = (
            require_signatures if require_signatures is not None else _settings.require_signatures()
        )
        self._validators: dict[tuple[str, str, str], SchemaCheck] = {}
        self._board: BreakerBoard | None = None
        self._output_checks: dict[tuple[str, str, str], OutputChecks] = {}
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._runs: _coderun.Runs | None = None
        self._runs_call: _coderun.NestedCall | None = None  # a scale-out backend's call path (internals)
        self._closed = False

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the worker pool, the engine and the database handles. Idempotent.

        The engine's epoch ticker stops when its last Runtime closes.
        """
        with self._wasm_lock:
            if self._closed:
                return
            self._closed = True
        with self._lock:
            executor = self._executor
        if executor is not None:
            executor.shutdown(wait=True)
        if self._wasm_parts is not None:
            self._wasm_parts.release()
        self._registry.close()
        self._audit.close()
        self._gate.close()
        if self._board is not None:
            self._board.close()
        if self._runs is not None:
            self._runs.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("this Runtime is closed")

    def _wasm(self) -> WasmParts:
        """The engine and what runs on it, made on first need."""
        parts = self._wasm_parts
        if parts is None:
            with self._wasm_lock:
                self._check_open()
                if self._wasm_parts is None:
                    self._wasm_parts = WasmParts(
                        self.engine_settings, self._registry, self.home, self.trusted_keys_dir, self.require_signatures
                    )
                parts = self._wasm_parts
        return parts

    def _breakers(self) -> BreakerBoard:
        """The circuit breakers of this home, opened on first need."""
        board = self._board
        if board is None:
            with self._lock:
                self._check_open()
                if self._board is None:
                    self._board = BreakerBoard(self.home)
                board = self._board
        return board

    @property
    def _sandbox(self) -> Sandbox:
        return self._wasm().sandbox

    @property
    def _compiled(self) -> CompiledCache:
        return self._wasm().compiled

    @property
    def _registrar(self) -> Registrar:
        return self._wasm().registrar

    # -- registry ----------------------------------------------------------

    def register(
        self,
        wasm_path: str | os.PathLike[str],
        manifest: ManifestSource = None,
        *,
        signature: str | os.PathLike[str] | None = None,
    ) -> ToolInfo:
        """Validate, compile and store a component with its manifest; return what was registered.

        The artifact is compiled in a resource-limited child process, checked
        against the glovebox world and instantiated once under its limits
        before anything is stored. A signature (``signature=``, else
        ``TOOL.wasm.sig`` beside the artifact) is verified against the trusted
        keys; with ``require_signatures`` an unsigned artifact is refused.

        Raises:
            InvalidArtifact: the file is not a component of the glovebox world.
            InvalidManifest: the manifest is malformed or asks for too much.
            SignatureError: the signature is missing, tampered with or untrusted.
        """
        self._check_open()
        return self._registrar.register(Path(wasm_path), manifest, signature)

    def verify(
        self,
        wasm_path: str | os.PathLike[str],
        *,
        manifest: ManifestSource = None,
        signature: str | os.PathLike[str] | None = None,
    ) -> str:
        """Check an artifact's signature against its manifest and this home's trusted keys.

        Nothing is registered; see :meth:`Keyring.verify`, which this calls.

        Returns:
            Who signed: ``NAME:KEY_ID``, as ``ToolInfo.signer`` would name it.

        Raises:
            SignatureError: the signature is missing, tampered with or untrusted.
        """
        self._check_open()
        return Keyring(self.home).verify(wasm_path, manifest=manifest, signature=signature)

    def trust_key(self, public_key_path: str | os.PathLike[str]) -> str:
        """Trust signatures made with an Ed25519 public key (PEM); return the signer ``NAME:KEY_ID``.

        Raises:
            SignatureError: the file is not an Ed25519 public key.
        """
        self._check_open()
        return Keyring(self.home).trust(public_key_path)

    def trusted_keys(self) -> list[str]:
        """The signers this home trusts, ``NAME:KEY_ID``, sorted by name."""
        self._check_open()
        return Keyring(self.home).keys()

    def tools(
        self, pattern: str | None = None, *, include_deprecated: bool = True, signed: bool | None = None
    ) -> list[ToolInfo]:
        """Registered tool versions, sorted by name, newest first.

        Args:
            pattern: an fnmatch pattern over tool names (``"text-*"``).
            include_deprecated: include deprecated versions.
            signed: True for signed versions only, False for unsigned only.
        """
        self._check_open()
        return self._registry.entries(pattern, include_deprecated=include_deprecated, signed=signed)

    def tool(self, ref: str) -> ToolInfo:
        """One tool: ``name@version``, or the newest non-deprecated version of ``name``.

        Raises:
            ToolNotFound: nothing matches.
        """
        self._check_open()
        return self._registry.resolve(ref)

    def visible_tools(self, principal: str | None = None) -> list[ToolInfo]:
        """The tools ``principal`` may see: the newest non-deprecated version of each
        name whose policy decision is not ``block`` and whose required scopes it holds.

        The servers list exactly these; a tool that needs approval is visible
        (calling it answers ``approval_required``).
        """
        self._check_open()
        who = principal or "anonymous"
        newest: dict[str, ToolInfo] = {}
        for info in self._registry.entries(include_deprecated=False):
            newest.setdefault(info.name, info)  # entries() lists each name newest first
        visible = []
        for info in newest.values():
            decision = self._gate.decide(info, who)
            if decision.action != "block" and not decision.missing_scopes:
                visible.append(info)
        return visible

    @property
    def live_instances(self) -> int:
        """Sandbox instances running right now (for metrics); 0 before the engine exists."""
        parts = self._wasm_parts
        return parts.sandbox.live_instances if parts is not None else 0

    def remove(self, ref: str, *, all_versions: bool = False) -> list[ToolInfo]:
        """Remove ``name@version``; running Runtimes stop seeing it.

        A bare ``name`` names every version, so it needs ``all_versions=True``.

        Raises:
            ToolNotFound: nothing matches.
            ValueError: ``ref`` is a bare name and ``all_versions`` is False.
        """
        self._check_open()
        if "@" not in ref and not all_versions:
            raise ValueError(f"{ref!r} names every version; give NAME@VERSION or pass all_versions=True")
        return self._registry.remove(ref)

    def gc(self, *, progress: Callable[[str], None] | None = None) -> list[Path]:
        """Delete what interrupted registrations and removals left in this home; return the paths.

        Staging folders and partial files of registrations or rebuilds whose
        process died (skipped while any process is staging, so a live
        registration is never touched), and blobs and compiled components no
        registered tool refers to. Safe to run at any time, from any process.
        ``progress`` is told each step (what is checked, how much goes), for a terminal.
        """
        self._check_open()
        return self._registry.gc(progress)

    def deprecate(self, ref: str, message: str = "") -> list[ToolInfo]:
        """Mark ``name@version`` (or every version of ``name``) deprecated.

        A deprecated version still runs when asked for by ``name@version``;
        a bare ``name`` resolves to the newest version that is not deprecated.
        Calls to a deprecated version carry ``meta["deprecated"]``.
        """
        self._check_open()
        return self._registry.deprecate(ref, message)

    # -- policy, approvals, audit -------------------------------------------

    @property
    def policy(self) -> Policy:
        """The policy in force (re-read first if its file changed)."""
        return self._gate.current()

    @property
    def policy_configured(self) -> bool:
        """Whether a policy (a file or a ``Policy``) was given, rather than the no-policy default."""
        return self._policy_given

    @property
    def policy_error(self) -> str | None:
        """Why the last reload failed (the previous policy stays in force), or None."""
        return self._gate.error

    def reload_policy(self) -> bool:
        """Re-read the policy file now; return whether a new policy took effect."""
        return self._gate.reload()

    def explain(self, name: str, *, principal: str | None = None) -> Decision:
        """What the policy decides for ``principal`` calling tool ``name``, and why.

        Without a policy the reason says so, and what happens then: a tool
        without required scopes runs with the Runtime's ``grants``; one with
        required scopes is refused.
        """
        self._check_open()
        decision = self._gate.decide(self._registry.resolve(name), principal or "anonymous")
        if self._policy_given:
            return decision
        refusal = decision.reason[:1] if decision.missing_scopes else ()
        return dataclasses.replace(decision, reason=(*refusal, NO_POLICY_REASON))

    def approve(self, approval_id: str, *, principal: str) -> Approval:
        """Approve a pending ``approval_required`` call on behalf of ``principal``.

        Raises:
            PermissionDenied: ``principal`` lacks the policy's approver scope,
                asked to approve its own request, or no policy is loaded.
            ValueError: the id is unknown, expired, or not pending any more.
        """
        self._check_open()
        if not isinstance(principal, str) or not principal:
            raise TypeError("principal must be a non-empty str")
        return self._gate.approve(approval_id, principal)

    def deny(self, approval_id: str, *, principal: str, reason: str) -> Approval:
        """Deny a pending ``approval_required`` call on behalf of ``principal``, saying why.

        Until the request expires, the caller's call with that input is answered
        ``permission_denied`` with ``reason`` (``details.reason``, ``details.denied_by``).

        Raises:
            PermissionDenied: ``principal`` lacks the policy's approver scope, or
                asked to deny its own request.
            ValueError: the id is unknown, expired, or not pending any more.
        """
        self._check_open()
        if not isinstance(principal, str) or not principal:
            raise TypeError("principal must be a non-empty str")
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError("a denial needs a reason (it is what the caller is told)")
        return self._gate.deny(approval_id, principal, reason)

    def pending_approvals(self, *, offset: int = 0, limit: int | None = None) -> list[Approval]:
        """Approval requests waiting for an approver, oldest first: ``limit`` (all when None) from ``offset``."""
        self._check_open()
        return self._gate.approvals.pending(offset=offset, limit=limit)

    def breakers(self) -> list[BreakerState]:
        """The circuit breakers of this home that are open, half-open, or closed with failures counted.

        Shared by every Runtime on the home, in any process (see ``glovebox.guards``).
        """
        self._check_open()
        if self._board is None and not (self.home / "guards.sqlite").exists():
            return []  # no breaker was ever used on this home: nothing to open
        return self._breakers().states()

    def reset_breakers(self, *, tool: str | None = None, host: str | None = None) -> int:
        """Close circuit breakers by hand: ``tool``'s, ``host``'s, or every one; return how many were not closed.

        Raises:
            ValueError: both ``tool`` and ``host`` are given.
        """
        self._check_open()
        return self._breakers().reset(tool=tool, host=host)

    @property
    def audit(self) -> AuditLog:
        """The audit log of this home."""
        return self._audit

    # -- runs (code mode: glovebox.runtime._coderun) ---------------------------

    def run(self, code: str, *, input: Any = None, principal: str | None = None, lang: str = "ts") -> RunResult:
        """Run a program that calls tools: ``export default async function (input, tools) { ... }``.

        The program (TypeScript, or JavaScript: ``lang="js"``) runs in a fresh
        sandbox of the code runner; each ``await tools.call(name, input)`` is a
        full call of ``principal`` (its own policy decision, quota, validation,
        sandbox and audit row), journaled in the home before the program sees
        its result, so ``runs.resume(run_id)`` continues a paused or crashed run
        without running a completed call again. Never raises for a failed run.

        Raises:
            TypeError: ``code`` is not a str, or ``principal`` neither a str nor None.
            BuildError: the program does not compile (esbuild's message, with line and column).
            InvalidInput: ``input`` breaks the JSON rules.
            ValueError: the Runtime is closed.
        """
        return self.runs.start(code, input=input, principal=principal, lang=lang)

    async def arun(self, code: str, *, input: Any = None, principal: str | None = None, lang: str = "ts") -> RunResult:
        """``run`` without blocking the event loop."""
        return await _coderun.arun(self.runs, code, input=input, principal=principal, lang=lang)

    @property
    def runs(self) -> _coderun.Runs:
        """The runs of this home: ``list``, ``show``, ``journal``, ``resume``, ``cancel``, ``collect``."""
        runs = self._runs
        if runs is None:
            with self._lock:
                self._check_open()
                if self._runs is None:
                    self._runs = _coderun.Runs(self, _not_found_message, call=self._runs_call)
                runs = self._runs
        return runs

    # -- calls ---------------------------------------------------------------

    def call(self, name: str, input: Any, *, principal: str | None = None) -> CallResult:
        """Run tool ``name`` (or ``name@version``) on the JSON value ``input``.

        Never raises for a failed call: the failure is in the result's ``error``.
        The input is held to the JSON rules of ``glovebox.core._jsonlimits`` before
        anything else happens (``invalid_input``); a tool name or principal that
        is not valid Unicode is refused the same way, with its lone surrogates
        escaped in ``meta`` and the audit record. A tool that is not registered
        answers ``tool_not_found``, whose message names only the tools that
        ``principal`` may see. The call first takes one of the Runtime's
        ``max_in_flight`` slots, waiting in line (at most ``max_queued`` wait)
        when none is free; with the line full it answers ``overloaded`` at once.

        Raises:
            TypeError: ``name`` is not a str, or ``principal`` is neither a str nor None (misuse).
            ValueError: the Runtime is closed.
        """
        return self._call_as(new_call_id(), name, input, principal)

    def _call_as(
        self, call_id: str, name: str, input: Any, principal: str | None, spans: list[Any] | None = None
    ) -> CallResult:
        """``call`` under a call id chosen by the caller (a ProcessPool picks it before dispatch);
        the call's ``glovebox.call`` span, when it has one, is appended to ``spans``."""
        self._check_open()
        _check_name(name)
        _check_principal(principal)
        with TracedCall(self._tracing.tracer()) as traced:
            result = traced.finish(self._enter(call_id, name, input, principal, traced.tracer))
        if spans is not None and traced.span is not None:
            spans.append(traced.span)
        return result

    def _enter(self, call_id: str, name: str, input: Any, principal: str | None, tracer: Any) -> CallResult:
        try:
            self._admission.enter()
        except Overloaded as refusal:
            return self._refuse(name, input, principal, refusal, call_id)
        return self._admitted(name, input, principal, call_id, tracer)

    def _admitted(
        self, name: str, input: Any, principal: str | None, call_id: str | None = None, tracer: Any = None
    ) -> CallResult:
        """Run a call that holds an admission slot, and give the slot back."""
        started = time.perf_counter()
        running = self._compute.enter()
        try:
            return self._attempts(name, input, principal, started, call_id, tracer)
        finally:
            self._compute.leave(running)
            self._admission.leave(time.perf_counter() - started)

    def _attempts(
        self, name: str, input: Any, principal: str | None, started: float, call_id: str | None, tracer: Any
    ) -> CallResult:
        """Run the call, and again while the policy's retries say so, then its fallbacks while they
        answer a retryable failure (see ``glovebox.runtime._retry``)."""
        attempts = Attempts(started, run_deadline=_run_deadline())
        result = self._retried(name, input, principal, started, attempts, call_id, tracer)
        for route in attempts.routes(result):
            attempts = attempts.routed(result)
            result = self._retried(route, input, principal, time.perf_counter(), attempts, None, tracer)
            if not attempts.moves_on(result):
                break
        return result

    def _retried(
        self,
        name: str,
        input: Any,
        principal: str | None,
        started: float,
        attempts: Attempts,
        call_id: str | None,
        tracer: Any,
    ) -> CallResult:
        result = self._run(name, input, principal, started, attempts, call_id, tracer)
        while (wait_s := attempts.next_wait(result)) is not None:
            with waiting():  # a backoff holds no compute slot
                time.sleep(wait_s)
            result = self._run(name, input, principal, time.perf_counter(), attempts, None, tracer)
        return result

    def _refuse(
        self, name: str, input: Any, principal: str | None, refusal: Overloaded, call_id: str | None = None
    ) -> CallResult:
        """The result (and audit row) of a call refused at admission."""
        return self._record(failure(refusal, new_meta(name, principal, call_id)), input, CallTrace())

    def _run(
        self,
        name: str,
        input: Any,
        principal: str | None,
        started: float,
        attempts: Attempts,
        call_id: str | None = None,
        tracer: Any = None,
    ) -> CallResult:
        meta = new_meta(name, principal, call_id)
        trace = CallTrace()
        try:
            encoded = _admissible(name, meta["principal"] if principal is None else principal, input)
            output = self._call(name, input, meta, trace, attempts, tracer, encoded)
            result = CallResult(ok=True, output=output, meta=meta)
        except CallTimeout as error:  # the run's deadline may have cut it short: it says so
            result = failure(attempts.run_timeout(error), meta)
        except Exception as error:
            result = failure(error, meta)
        finally:
            self._gate.settle(trace, meta["fuel_used"])
        attempts.note(trace.guards)
        if trace.breaker is not None:
            self._report(trace.breaker, result)
        if tracer is not None and trace.decision is not None:
            _tracing.note_decision(trace.decision)
        meta["duration_ms"] = round((time.perf_counter() - started) * 1000, 3)
        return self._record(result, input, trace)

    def _report(self, breaker: tuple[str, Breaker], result: CallResult) -> None:
        """Tell the tool's breaker how the call went: a success, a failure it counts, or neither."""
        name, settings = breaker
        if result.ok:
            self._breakers().record("tool", name, settings, failed=False)
        elif result.code in settings.count:
            self._breakers().record("tool", name, settings, failed=True)

    def _record(self, result: CallResult, value: Any, trace: CallTrace) -> CallResult:
        """Commit the audit record; a call that cannot be audited fails closed."""
        try:
            self._audit.append(trace.record(result, value))
        except Exception as error:
            call_id = result.meta["call_id"]
            logger.error("cannot write the audit record of call %s", call_id)
            failed = failure(error, result.meta)
            try:  # the call still leaves its row: the bare facts, marked as cut
                self._audit.append(bare_row(failed, input_digest=trace.input_digest, decision=trace.decision))
            except Exception:
                logger.exception("cannot write even the bare audit record of call %s", call_id)
            return failed
        return result

    async def acall(self, name: str, input: Any, *, principal: str | None = None) -> CallResult:
        """``call`` for a coroutine: admitted, then run on a thread of its own.

        A call waiting for a slot holds no thread; an admitted call runs on a
        pool of up to ``max_in_flight`` threads, so calls waiting on upstreams
        are not capped by the CPU count. A refused call answers ``overloaded``.
        """
        self._check_open()
        _check_name(name)
        _check_principal(principal)
        with TracedCall(self._tracing.tracer()) as traced:
            return traced.finish(await self._aenter(name, input, principal, traced.tracer))

    async def _aenter(self, name: str, input: Any, principal: str | None, tracer: Any) -> CallResult:
        import asyncio  # imported here to keep `import glovebox` light

        try:
            await self._admission.aenter()
        except Overloaded as refusal:
            return await asyncio.to_thread(self._refuse, name, input, principal, refusal)
        job_args = (name, input, principal, None, tracer)
        run: Callable[[], CallResult] = functools.partial(self._admitted, *job_args)
        if tracer is not None:  # the worker thread runs in this coroutine's context: the call span is current
            run = functools.partial(contextvars.copy_context().run, self._admitted, *job_args)
        try:
            job = self._pool().submit(run)
        except BaseException:  # closed meanwhile
            self._admission.leave()
            raise
        job.add_done_callback(self._unclaimed)
        return await asyncio.wrap_future(job)

    def _unclaimed(self, job: Future[CallResult]) -> None:
        """A job cancelled before it ran gives its slot back (one that ran did already)."""
        if job.cancelled():
            self._admission.leave()

    @property
    def in_flight(self) -> int:
        """Calls holding an admission slot right now (for metrics)."""
        return self._admission.in_flight

    @property
    def queued(self) -> int:
        """Calls waiting for an admission slot right now (for metrics)."""
        return self._admission.queued

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            self._check_open()
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self._admission.max_in_flight, thread_name_prefix="glovebox"
                )
            return self._executor

    def _call(
        self,
        name: str,
        value: Any,
        meta: dict[str, Any],
        trace: CallTrace,
        attempts: Attempts,
        tracer: Any = None,
        encoded: tuple[str, int] | None = None,
    ) -> Any:
        """The steps of an admitted call: resolve, the policy's decision, the input's checks,
        the run (a sandbox, or the remote server of a ``mcp-remote`` tool), the output's checks.

        ``encoded`` is the input's JSON text and UTF-8 size as ``_admissible`` made them (None: made here)."""
        info = self._resolve_step(name, value, meta, trace)
        attempts.check_run()
        decision = attempts.begin(self._policy_step(info, meta, trace, tracer), meta)
        breaker = decision.guards.breaker
        if breaker is not None:
            self._breaker_step(info, breaker, trace)
        input_text = self._input_step(info, value, tracer, encoded)
        self._gate.spend_approval(trace, info, meta["principal"], decision)
        if info.kind == "mcp-remote":
            text = self._call_remote(info, value, decision, meta)
        else:
            text = self._sandbox_step(info, input_text, decision, meta, tracer, trace)
        output = self._decode_output(info, text, tracer)
        if decision.guards.checks is not None or info.manifest.checks is not None:
            self._check_step(info, decision, value, output, text, meta, attempts, tracer)
        return output

    def _check_step(
        self,
        info: ToolInfo,
        decision: Decision,
        value: Any,
        output: Any,
        text: str,
        meta: dict[str, Any],
        attempts: Attempts,
        tracer: Any,
    ) -> None:
        """The policy's and the manifest's output checks (see ``glovebox.runtime._checks``);
        a failure raises ``EvaluationFailed``."""
        checks, declared = decision.guards.checks, info.manifest.checks
        key = (info.digest, info.name, "checks")
        kept = self._output_checks.get(key)
        if kept is None or not kept.kept_for(checks, declared):
            kept = self._output_checks[key] = OutputChecks(checks, declared)
        scrubber = None
        secrets = self._grants_for(decision).secrets
        if kept.secrets and secrets:
            from ..capabilities._secrets import Scrubber, load_secrets

            scrubber = Scrubber(load_secrets(secrets))
        judge = functools.partial(self._judge, meta["principal"], attempts.deadline, tracer)
        kept.evaluate(output, text, scrubber, meta, judge, {"tool": info.name, "input": value})

    def _judge(
        self, principal: str, deadline: float | None, tracer: Any, name: str, payload: dict[str, Any]
    ) -> CallResult:
        """An evaluator tool's call: a fresh sandbox and audit row, same principal, inside the judged deadline."""
        now = time.perf_counter()
        return self._run(name, payload, principal, now, Attempts(now, within=deadline), None, tracer)

    def _resolve_step(self, name: str, value: Any, meta: dict[str, Any], trace: CallTrace) -> ToolInfo:
        """The tool the call names, its facts in ``meta``; the input's digest and the policy in ``trace``."""
        trace.input_digest = input_digest(value)
        trace.policy = self._gate.current()
        info = self._resolve_for(name, meta["principal"])
        meta.update(tool=info.name, version=info.version, digest=info.digest)
        if info.deprecated is not None:
            meta["deprecated"] = info.deprecated
        return info

    def _policy_step(self, info: ToolInfo, meta: dict[str, Any], trace: CallTrace, tracer: Any) -> Decision:
        """Scopes, rules, quotas and approvals: the decision, or the refusal raised."""
        with step(tracer, "glovebox.policy") as span:
            decision = self._gate.admit(trace, info, meta["principal"])
            if span is not None:
                span.set_attribute("glovebox.policy.decision", decision.action)
        return decision

    def _breaker_step(self, info: ToolInfo, breaker: Breaker, trace: CallTrace) -> None:
        """Fail fast (``circuit_open``) when the tool's breaker, or its imported operation's host's, is open."""
        board = self._breakers()
        if "tool" in breaker.scopes:
            board.check("tool", info.name, breaker)
            trace.breaker = (info.name, breaker)
        operation = info.manifest.operation
        if "host" in breaker.scopes and operation is not None:  # the one host it calls is known before it runs
            host = urlsplit(operation.url).hostname
            if host and board.check("host", host, breaker):
                trace.probing = {host}

    def _input_step(self, info: ToolInfo, value: Any, tracer: Any, encoded: tuple[str, int] | None = None) -> str:
        """The input as the tool receives it, checked against its schema."""
        input_text = encode_input(value) if encoded is None else sized_input(*encoded)
        if info.input_schema is not True:
            with step(tracer, "glovebox.validate", "input"):
                self._validator(info, "input").validate(value, input_text)
        if info.kind == "mcp-remote" and not isinstance(value, dict):  # MCP arguments are an object
            raise InvalidInput(f"a remote MCP tool takes a JSON object as input, not {type(value).__name__}")
        if info.manifest.operation is not None or info.manifest.sql_operation is not None:
            input_text = _operation_input(info, input_text)  # an imported operation: the generic guest reads both
        return input_text

    def _sandbox_step(
        self,
        info: ToolInfo,
        input_text: str,
        decision: Decision,
        meta: dict[str, Any],
        tracer: Any,
        trace: CallTrace | None = None,
    ) -> str:
        """A fresh instance runs ``call`` under the decision's limits and grants; its output text."""
        component = self._component(info)
        grants = self._grants_for(decision)
        trace = trace if trace is not None else CallTrace()
        context = self._capability_context(info, meta["principal"], tracer, decision.guards.breaker, trace)
        capabilities = bind_capabilities(info.manifest.capabilities, grants, context)
        with step(tracer, "glovebox.sandbox") as span:
            try:
                outcome = self._sandbox.run(component, input_text, decision.limits, capabilities)
            finally:
                capabilities.close(trace)
            if span is not None:
                _tracing.mark(span, _code(outcome.error), {"glovebox.fuel_used": outcome.fuel_used})
        meta["fuel_used"] = outcome.fuel_used
        _record_state(meta, outcome.state)
        capabilities.record(meta, outcome.state)
        if outcome.error is not None:
            raise outcome.error
        assert outcome.output_text is not None
        return outcome.output_text

    def _call_remote(self, info: ToolInfo, value: dict[str, Any], decision: Decision, meta: dict[str, Any]) -> str:
        """Proxy a call of a ``mcp-remote`` tool to its server (see ``glovebox.remote._proxy``)."""
        from ..remote._proxy import call_remote, load_descriptor  # the mcp SDK only when a remote tool is called

        descriptor = load_descriptor(self._registry.descriptor_path(info.digest), info.digest)
        meta["remote"] = {"url": descriptor.origin, "tool": descriptor.tool}
        limits = decision.limits
        exchange = functools.partial(call_remote, descriptor, value, limits.timeout_ms, limits.output_bytes)
        breaker, host = decision.guards.breaker, urlsplit(descriptor.origin).hostname
        with waiting():  # the exchange is network I/O: the compute slot is free for others meanwhile
            if breaker is not None and "host" in breaker.scopes and host:  # the server's host has a breaker too
                return HostBreakers(self._breakers(), breaker).exchange(host, exchange)
            return exchange()

    def _resolve_for(self, name: str, principal: str) -> ToolInfo:
        """The tool a call names; a miss lists only the tools ``principal`` may see."""
        try:
            return self._registry.resolve(name)
        except ToolNotFound as missing:
            visible = [info.name for info in self.visible_tools(principal)]
            raise ToolNotFound(_not_found_message(name, principal, visible), details=missing.details) from missing

    def _grants_for(self, decision: Decision) -> Grants:
        """The capabilities of one call: the policy's grants, or, with no policy, ``grants``."""
        return decision.grants if self._policy_given else self._grants

    def _capability_context(
        self, info: ToolInfo, principal: str, tracer: Any, breaker: Breaker | None, trace: CallTrace
    ) -> CapabilityContext:
        """What binding the call's capabilities may need (the factories run only for a granted capability)."""
        hosts = None
        if breaker is not None and "host" in breaker.scopes:
            hosts = functools.partial(_host_breakers, self._breakers, breaker, trace.probing)  # the board opens on use
        approver = functools.partial(self._gate.statement_approver, trace, info, principal)
        return CapabilityContext(self.home, principal, tracer, self._transport, hosts, approver)

    def _validator(self, info: ToolInfo, which: str) -> SchemaCheck:
        key = (info.digest, info.name, which)
        validator = self._validators.get(key)
        if validator is None:
            schema = info.input_schema if which == "input" else info.output_schema
            validator = SchemaCheck.for_schema(schema, which, info.manifest.limits.timeout_ms)
            self._validators[key] = validator
        return validator

    def _component(self, info: ToolInfo) -> Component:
        return self._compiled.get(info.digest)

    def _decode_output(self, info: ToolInfo, text: str, tracer: Any = None) -> Any:
        try:
            output = loads_json(text)
        except JsonRejected as exc:
            details = {**exc.details, "excerpt": escape_surrogates(text[:200])}
            raise InvalidOutput(f"the tool's output {exc}", details=details) from exc
        if info.output_schema is not True:
            with step(tracer, "glovebox.validate", "output"):
                self._validator(info, "output").validate(output)
        return output


def _run_deadline() -> float | None:
    """The deadline (``time.perf_counter``) of the code-mode run making this call, from its context's
    ``deadline_at`` (epoch seconds: it crosses a process or a host), or None outside a run."""
    run = RUN_CONTEXT.get()
    if run is None:
        return None
    at = run.get("deadline_at")
    if not isinstance(at, int | float) or isinstance(at, bool):
        return None
    return time.perf_counter() + (float(at) - time.time())


def _code(error: CallError | None) -> str | None:
    return None if error is None else error.code


def _operation_input(info: ToolInfo, input_text: str) -> str:
    """``{"operation": <descriptor>, "input": <validated input>}`` for the generic HTTP-operation or SQL guest."""
    operation = info.manifest.operation or info.manifest.sql_operation
    assert operation is not None
    return f'{{"operation":{operation.model_dump_json()},"input":{input_text}}}'


def _check_name(name: Any) -> None:
    if not isinstance(name, str):
        raise TypeError(f"tool name must be a str, not {type(name).__name__}")


def _check_principal(principal: Any) -> None:
    """A principal is a str (or None): anything else could not even be audited."""
    if principal is not None and not isinstance(principal, str):
        raise TypeError(f"principal must be a str or None, not {type(principal).__name__}")


_DROPPED_COUNTS = ("logs_dropped", "denials_dropped", "egress_dropped", "upstream_failures_dropped", "sql_log_dropped")


def _host_breakers(board: Callable[[], BreakerBoard], breaker: Breaker, probing: set[str] | None) -> HostBreakers:
    return HostBreakers(board(), breaker, probing)


def _record_state(meta: dict[str, Any], state: CallState) -> None:
    """Put what the host functions recorded (already bounded and scrubbed) into meta."""
    if state.egress:
        meta["egress"] = state.egress
    meta["logs"] = state.logs
    if state.denials:
        meta["denials"] = state.denials
    if state.sql_log:
        meta["sql"] = state.sql_log
    if (
        state.logs_dropped
        or state.denials_dropped
        or state.egress_dropped
        or state.upstream_failures_dropped
        or state.sql_log_dropped
    ):
        for name in _DROPPED_COUNTS:
            if getattr(state, name):
                meta[name] = getattr(state, name)


def _not_found_message(name: str, principal: str, visible: list[str]) -> str:
    """What a call of an unknown tool answers: never a tool the caller may not see."""
    if not visible:
        return f"no tool named {name!r} is registered; none is available to {principal!r}"
    shown = ", ".join(visible[:20]) + (", …" if len(visible) > 20 else "")
    return f"no tool named {name!r} is registered; available to {principal!r}: {shown}"


def _admissible(name: str, principal: Any, value: Any) -> tuple[str, int] | None:
    """Refuse, before anything else, what no later step may see: strings that are not
    valid Unicode and inputs that break the JSON rules. Return the input's JSON text and
    its UTF-8 size, made once here for the later steps (None when it is not JSON)."""
    for what, text in (("tool name", name), ("principal", principal)):
        if isinstance(text, str) and escape_surrogates(text) != text:
            raise InvalidInput(
                f"the {what} {escape_surrogates(text)!r} holds a lone surrogate: it must be valid Unicode"
            )
    try:
        return checked_text(value)
    except JsonRejected as exc:
        raise InvalidInput(f"input {exc}", details=exc.details) from exc
